"""Savarese et al. 2019, App. C: parallel ReLU sub-networks of depth L = 2…5 and ℓ_{2/L} sparsity.

Command-line entry; the figure itself (compute, plot, verdict) is repcost.figures.savarese19_parallel.

    python experiments/savarese19-parallel.py [--full] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import savarese19_parallel as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
