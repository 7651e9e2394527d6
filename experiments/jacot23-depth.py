"""Jacot 2023 §4 / App. D: rank recovery against depth on the rank-k task, beside a KRR baseline.

Command-line entry; the figure itself (compute, plot, verdict) is repcost.figures.jacot23_depth.

    python experiments/jacot23-depth.py [--full] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import jacot23_depth as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
