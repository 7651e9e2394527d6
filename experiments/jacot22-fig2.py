"""Jacot, Golikov, Hongler, Gabriel 2022, Fig 2: the loss plateau against width (L = 3).

Command-line entry; the figure itself (inputs, compute, plot, verdict) is repcost.figures.jacot22_fig2.

    python experiments/jacot22-fig2.py [--full] [--full-only PRESET ...] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import jacot22_fig2 as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
