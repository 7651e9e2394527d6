"""The learned function of a 1-D regression run against its training points."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def fit_1d_figure(x_grid: np.ndarray, f_grid: np.ndarray, x: np.ndarray, y: np.ndarray, title: str = ""):
    """A Figure of f on a grid (line) and the training points (dots)."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(x_grid, f_grid, lw=1.5, label="learned f")
    ax.scatter(x, y, color="k", zorder=3, s=18, label="training points")
    ax.set_xlabel("x")
    ax.set_ylabel("f(x)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
