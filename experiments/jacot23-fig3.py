"""Jacot 2023 Fig 3: autoencoders with λ = 1e-4 are naturally denoising when deep, not when shallow.

Command-line entry; the figure itself (inputs, compute, plot, verdict) is repcost.figures.jacot23_fig3.

    python experiments/jacot23-fig3.py [--full] [--full-only PRESET ...] [--launcher parallel] [--out DIR] [--workdir DIR] [--set KEY=VALUE ...]
"""

from repcost.figures import figure_main
from repcost.figures import jacot23_fig3 as figure

if __name__ == "__main__":
    figure_main(figure, __doc__.splitlines()[0])
