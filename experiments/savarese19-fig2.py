"""Savarese et al. 2019, Fig 2: the Fig 1 points fitted by ReLU nets with 2, 3 and 4 hidden layers.

Command-line entry; the figure itself (compute, plot, verdict) is repcost.figures.savarese19_fig2.

    python experiments/savarese19-fig2.py [--full] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import savarese19_fig2 as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
