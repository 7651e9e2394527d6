"""Ongie & Willett Fig 1: weight decay promotes unit alignment with more linear layers (L = 2, 3, 4).

Command-line entry; the figure itself (compute, plot, verdict) is repcost.figures.ongie22_fig1.

    python experiments/ongie22-fig1.py [--full] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import ongie22_fig1 as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
