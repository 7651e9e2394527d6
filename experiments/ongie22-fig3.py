"""Ongie & Willett Fig 3 (+ Fig 6): two rays separated by 2π/3, w1 ∝ (2, 1); interpolants learned with L = 2 and L = 3.

Command-line entry; the figure itself (compute, plot, verdict) is repcost.figures.ongie22_fig3.

    python experiments/ongie22-fig3.py [--full] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import ongie22_fig3 as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
