"""Ongie & Willett Fig 4: R2 and R3 costs of §5.2's f (units along the rays) and g (units along ±w0) vs ray angle.

Command-line entry; the figure itself (inputs, compute, plot, verdict) is repcost.figures.ongie22_fig4.

    python experiments/ongie22-fig4.py [--full] [--out DIR]
"""

from repcost.figures import figure_main
from repcost.figures import ongie22_fig4 as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
