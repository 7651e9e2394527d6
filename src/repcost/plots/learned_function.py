"""A run's learned function R → R against its training points (and, where given, the min-norm linear spline)."""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def learned_function_figure(x_grid: np.ndarray, f_grid: np.ndarray, x: np.ndarray, y: np.ndarray, title: str = "",
                            spline_grid: np.ndarray | None = None) -> Figure:
    """A Figure of f on a grid (line), the training points (dots) and, if given, the linear spline of least
    representation cost through them (Savarese et al. 2019 Thm 3.3; dashed).

    A bare Figure on an Agg canvas, not pyplot: no backend machinery to start (part of every 1-D run's
    start-up cost) and nothing to close; `fig.savefig` writes it."""
    fig = Figure(figsize=(5, 3.5))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    if spline_grid is not None:
        ax.plot(x_grid, spline_grid, lw=1.2, ls="--", color="0.45", label="min-norm linear spline (Savarese Thm 3.3)")
    ax.plot(x_grid, f_grid, lw=1.5, label="learned f")
    ax.scatter(x, y, color="k", zorder=3, s=18, label="training points")
    ax.set_xlabel("x")
    ax.set_ylabel("f(x)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.set_layout_engine(None)  # laid out: savefig then draws once, without a layout pass first
    return fig
