"""Jacot 2023 Fig 1: spectra of hidden representations, weights and Jacobians of a deep fc net on a rank-5 task.

Command-line entry; the figure itself (compute, plot, verdict) is repcost.figures.jacot23_fig1.

    python experiments/jacot23-fig1.py [--full] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import jacot23_fig1 as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
