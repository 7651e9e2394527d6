"""Surfaces of 2-D interpolants for the Ongie & Willett (2022) figures: arrays in, matplotlib Figure out.

A "surface" is (X, Y, Z) from :func:`grid_values`.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from matplotlib.figure import Figure


def grid_values(fn: Callable[[np.ndarray], np.ndarray], lim: float = 1.2, n: int = 61):
    """(X, Y, Z) with Z = fn(points) on an n × n grid of [−lim, lim]²; fn maps (N, 2) → (N,)."""
    g = np.linspace(-lim, lim, n)
    X, Y = np.meshgrid(g, g)
    Z = np.asarray(fn(np.stack([X.ravel(), Y.ravel()], axis=1))).reshape(X.shape)
    return X, Y, Z


def _draw_surface(ax, surface, title: str, x, y, arrows=(), span=None, legend: bool = False) -> None:
    """One 3-D panel: the surface, the samples (x, y) in black and, at z = min, arrows = [(vec, colour, label)]
    from the origin and the line span = (u, colour) through ±u."""
    X, Y, Z = surface
    lim, z0 = float(np.max(X)), float(np.min(Z))
    ax.plot_surface(X, Y, Z, cmap="viridis", linewidth=0, antialiased=True, alpha=0.8)
    ax.scatter(x[:, 0], x[:, 1], y, color="k", s=12, depthshade=False)
    for vec, colour, label in arrows:
        v = np.asarray(vec, dtype=float) / np.linalg.norm(vec) * 0.9 * lim
        ax.plot([0, v[0]], [0, v[1]], [z0, z0], color=colour, lw=2, label=label)
    if arrows and legend:
        ax.legend(loc="upper left", fontsize=7)
    if span is not None:
        u = np.asarray(span[0], dtype=float) / np.linalg.norm(span[0]) * lim
        ax.plot([-u[0], u[0]], [-u[1], u[1]], [z0, z0], color=span[1], lw=2)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")
    ax.view_init(elev=28, azim=-60)


def surfaces_figure(panels: Sequence[dict], ncols: int, suptitle: str, bottom: Sequence[Callable] = ()) -> Figure:
    """3-D surface panels (each: the keyword arguments of `_draw_surface`) `ncols` to a row; the `bottom` callables
    draw 2-D panels on their axes and share one last row, each as wide as the row allows (no empty panels)."""
    nrows = -(-len(panels) // ncols) + (1 if bottom else 0)
    fig = Figure(figsize=(4.2 * ncols, 3.8 * nrows), layout="tight")
    gs = fig.add_gridspec(nrows, ncols)
    for i, p in enumerate(panels):
        _draw_surface(fig.add_subplot(gs[i // ncols, i % ncols], projection="3d"), legend=i == 0, **p)
    bounds = np.linspace(0, ncols, len(bottom) + 1).round().astype(int)
    for i, draw in enumerate(bottom):
        draw(fig.add_subplot(gs[nrows - 1, bounds[i]:bounds[i + 1]]))
    fig.suptitle(suptitle, fontsize=10)
    return fig
