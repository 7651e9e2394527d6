"""Figure builders for Ongie & Willett (2022): surfaces of 2-D interpolants, ray checks, cost curves.

Pure: arrays in, matplotlib Figure out.  A "surface" is (X, Y, Z) from :func:`grid_values`.
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


def _draw_surface(ax, X, Y, Z, title, x=None, y=None, arrows=(), legend=False):
    ax.plot_surface(X, Y, Z, cmap="viridis", linewidth=0, antialiased=True, alpha=0.8)
    if x is not None:
        ax.scatter(x[:, 0], x[:, 1], y, color="k", s=12, depthshade=False)
    z0 = float(np.min(Z))
    for vec, colour, label in arrows:
        v = np.asarray(vec, dtype=float)
        v = v / np.linalg.norm(v) * 0.9 * float(np.max(X))
        ax.plot([0, v[0]], [0, v[1]], [z0, z0], color=colour, lw=2, label=label)
    if arrows and legend:
        ax.legend(loc="upper left", fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")
    ax.view_init(elev=28, azim=-60)


def _draw_ray_check(ax, p):
    for j, (ts, ys) in enumerate(zip(p["t_samples"], p["y_samples"])):
        ax.plot(ts, ys, "ko", ms=4, label="samples" if j == 0 else None)
    styles = ["-", "--", ":", "-."]
    for k, (label, per_ray) in enumerate(p["curves"].items()):
        for j, vals in enumerate(per_ray):
            ax.plot(p["t_grid"], vals, styles[k % 4], color=f"C{j}", lw=1.2, label=f"{label}, ray {j + 1}")
    ax.set_xlabel("t (distance along the ray)")
    ax.set_ylabel("value")
    ax.set_title(p["title"], fontsize=9)
    ax.legend(fontsize=6)


def surfaces_figure(surfaces: Sequence, titles: Sequence[str], x=None, y=None,
                    arrows: Sequence[tuple] = (), ncols: int | None = None, suptitle: str = "",
                    ray_panels: Sequence[dict] = ()) -> Figure:
    """3-D surface panels (training samples (x, y) in black; arrows = [(vec, colour, label)] at z = min),
    then optionally one row of interpolation checks along rays (Ongie Fig 6; each a dict: title, t_samples and
    y_samples [one per ray], t_grid, curves {label: [values per ray on t_grid]})."""
    n = len(surfaces)
    ncols = max(ncols or n, len(ray_panels))
    nrows = int(np.ceil(n / ncols)) + (1 if ray_panels else 0)
    fig = Figure(figsize=(4.2 * ncols, 3.8 * nrows))
    gs = fig.add_gridspec(nrows, ncols)
    for i, ((X, Y, Z), title) in enumerate(zip(surfaces, titles)):
        ax = fig.add_subplot(gs[i // ncols, i % ncols], projection="3d")
        _draw_surface(ax, X, Y, Z, title, x, y, arrows, legend=(i == 0))
    # the ray checks share the last row, each as wide as the row allows (no empty panels)
    bounds = np.linspace(0, ncols, len(ray_panels) + 1).round().astype(int) if ray_panels else []
    for i, p in enumerate(ray_panels):
        _draw_ray_check(fig.add_subplot(gs[nrows - 1, bounds[i]:bounds[i + 1]]), p)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    return fig


def add_bar_panel(fig: Figure, pos: tuple, groups: dict, title: str, ylabel: str, log: bool = True):
    """Grouped bars (e.g. normalised singular values s_i/s_1 per depth) in subplot position pos = (nrows, ncols, index)."""
    ax = fig.add_subplot(*pos)
    names = list(groups)
    width = 0.8 / max(1, len(names))
    for j, name in enumerate(names):
        v = np.asarray(groups[name], dtype=float)
        ax.bar(np.arange(v.size) + j * width, v, width=width, label=name)
    n = max(np.asarray(v).size for v in groups.values())
    ax.set_xticks(np.arange(n) + 0.4 - width / 2)
    ax.set_xticklabels([f"$s_{i + 1}$" for i in range(n)])
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=7)
    return ax


def costs_vs_angle_figure(angles_pi, r2f, r2g, r3f, r3g, shade, title: str = "") -> Figure:
    """R2 and R3 costs of f (units along rays) and g (units along ±w0) vs ray separation (Ongie Fig 4).

    shade: boolean per angle, where Prop 5.2's condition holds (highlighted in yellow).
    """
    angles_pi = np.asarray(angles_pi, dtype=float)
    fig = Figure(figsize=(10, 3.8))
    for i, (cf, cg, name) in enumerate(((r2f, r2g, "$R_2$"), (r3f, r3g, "$R_3$"))):
        ax = fig.add_subplot(1, 2, i + 1)
        _shade(ax, angles_pi, np.asarray(shade, dtype=bool))
        ax.plot(angles_pi, cf, "C0-", label=f"{name}(f), units along rays")
        ax.plot(angles_pi, cg, "C3--", label=f"{name}(g), units along ±$w_0$")
        ax.set_xlabel("angle between rays / π")
        ax.set_ylabel(f"{name} cost")
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def _shade(ax, xs, mask):
    """Shade contiguous runs of mask (yellow), one legend entry."""
    dx = (xs[1] - xs[0]) / 2 if xs.size > 1 else 0.0
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(int), [0]])))  # starts, then ends, of the runs
    for k, (i, j) in enumerate(zip(edges[::2], edges[1::2] - 1)):
        ax.axvspan(xs[i] - dx, xs[j] + dx, color="gold", alpha=0.3, label=None if k else "Prop 5.2 condition holds")


def subspace_panels_figure(surfaces: Sequence, titles: Sequence[str], x, y, phis_deg, r3, marks: dict,
                           lines: Sequence[tuple] = (), suptitle: str = "") -> Figure:
    """Ongie Figs 5/7: a row of surfaces (interpolants on different subspaces; lines = [(u, colour)] per panel
    drawn as span(u) at z = min), then R3 of the projection interpolant vs the angle of u."""
    n = len(surfaces)
    fig = Figure(figsize=(4.2 * n, 7.6))
    gs = fig.add_gridspec(2, n, height_ratios=[1.2, 1.0])
    for i, ((X, Y, Z), title) in enumerate(zip(surfaces, titles)):
        ax = fig.add_subplot(gs[0, i], projection="3d")
        _draw_surface(ax, X, Y, Z, title, x, y)
        if i < len(lines) and lines[i] is not None:
            u, colour = lines[i]
            u = np.asarray(u, dtype=float) / np.linalg.norm(u) * float(np.max(X))
            z0 = float(np.min(Z))
            ax.plot([-u[0], u[0]], [-u[1], u[1]], [z0, z0], color=colour, lw=2)
    ax = fig.add_subplot(gs[1, :])
    ax.semilogy(phis_deg, r3, "k.-", lw=0.8, ms=3, label="$R_3$ of the min-$R_2$ interpolant on span(u)")
    for k, (label, (phi, val)) in enumerate(marks.items()):
        ax.semilogy([phi], [val], "o", ms=8, color=f"C{k}", label=label)
    ax.set_xlabel("angle of u (degrees)")
    ax.set_ylabel("$R_3$ cost")
    ax.legend(fontsize=8)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    return fig
