"""Ongie & Willett Fig 2: two rays separated by 0.55π and 0.52π; interpolants learned with L = 2 and L = 3.

Command-line entry; the figure itself (compute, plot, verdict) is repcost.figures.ongie22_fig2.

    python experiments/ongie22-fig2.py [--full] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import ongie22_fig2 as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
