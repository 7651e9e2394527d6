"""Jacot 2023 Fig 2: decision regions on four translated inverted-S classes, depth 2 vs 9, with and without L2.

Command-line entry; the figure itself (compute, plot, verdict) is repcost.figures.jacot23_fig2.

    python experiments/jacot23-fig2.py [--full] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import jacot23_fig2 as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
