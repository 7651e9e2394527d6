"""Jacot, Golikov, Hongler, Gabriel 2022, Fig 1: attraction/repulsion forces and neuron alignment.

Command-line entry; the figure itself (compute, plot, verdict) is repcost.figures.jacot22_fig1.

    python experiments/jacot22-fig1.py [--full] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import jacot22_fig1 as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
