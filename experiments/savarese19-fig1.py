"""Savarese et al. 2019, Fig 1: the linear-spline interpolant beside 2-layer ReLU nets of width 20 and 100.

Command-line entry; the figure itself (compute, plot, verdict) is repcost.figures.savarese19_fig1.

    python experiments/savarese19-fig1.py [--full] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import savarese19_fig1 as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
