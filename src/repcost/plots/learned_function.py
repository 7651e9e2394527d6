"""Learned functions R → R against their training points: a run's fit.png and Savarese et al. 2019 Figs 1–2."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def function_panels(x: np.ndarray, y: np.ndarray, grid: np.ndarray, curves: Sequence[np.ndarray], titles: Sequence[str],
                    reference: np.ndarray | None = None, knots: Sequence[np.ndarray] | None = None) -> Figure:
    """One panel per function on `grid`: its curve, the training points (x, y), the optional reference curve (the
    linear spline of least representation cost through the points, Savarese et al. 2019 Thm 3.3; dashed) and the
    optional kink positions of each function (ticks at the bottom).

    A bare Figure on an Agg canvas, not pyplot: no backend machinery to start (part of every 1-D run's
    start-up cost) and nothing to close; `fig.savefig` writes it."""
    fig = Figure(figsize=(4.0 * len(curves) + 1.0, 3.5))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(curves), sharey=True, squeeze=False)[0]
    lo, hi = min(np.min(y), *(np.min(c) for c in curves)), max(np.max(y), *(np.max(c) for c in curves))
    pad = 0.1 * (hi - lo + 1e-12)
    for i, (ax, f, title) in enumerate(zip(axes, curves, titles)):
        if reference is not None:
            ax.plot(grid, reference, lw=1.2, ls="--", color="0.45", label="min-norm linear spline (Savarese Thm 3.3)")
        ax.plot(grid, f, lw=1.5, color="C0", label="learned f")
        ax.scatter(x, y, color="k", zorder=3, s=18, label="training points")
        if knots is not None:
            k = knots[i][(knots[i] >= grid[0]) & (knots[i] <= grid[-1])]
            ax.plot(k, np.full_like(k, lo - 0.6 * pad), "|", color="C3", ms=8, label="kinks")
        ax.set_xlim(grid[0], grid[-1])
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("x")
    axes[0].set_ylabel("f(x)")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.set_layout_engine(None)  # laid out: savefig then draws once, without a layout pass first
    return fig
