"""Jacot, Golikov, Hongler, Gabriel 2022, Prop 13–15: where the loss plateau starts for toy data.

Command-line entry; the figure itself (inputs, compute, plot, verdict) is repcost.figures.jacot22_bipartite.

    python experiments/jacot22-bipartite.py [--full] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import jacot22_bipartite as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
