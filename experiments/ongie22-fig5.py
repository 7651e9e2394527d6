"""Ongie & Willett Figs 5 and 7 (§5.3): interpolants built on projections onto 1-D subspaces, and their R3 costs.

Command-line entry; the figure itself (inputs, compute, plot, verdict) is repcost.figures.ongie22_fig5.

    python experiments/ongie22-fig5.py [--full] [--out DIR]
"""

from repcost.figures import figure_main
from repcost.figures import ongie22_fig5 as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
