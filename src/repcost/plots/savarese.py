"""Figures of Savarese et al. (2019): 1-D interpolants side by side (Figs 1–2) and App. C sparsity."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure


def interpolant_panels(x: np.ndarray, y: np.ndarray, x_grid: np.ndarray, curves: Sequence[np.ndarray],
                       titles: Sequence[str], reference: np.ndarray | None = None, knots: Sequence | None = None):
    """One panel per function: the curve on x_grid, the data (x, y), the optional reference curve
    (dashed, e.g. the linear-spline interpolant) and the optional kink positions (ticks at the bottom)."""
    n = len(curves)
    fig = Figure(figsize=(4.0 * n, 3.4))
    axes = fig.subplots(1, n, sharey=True, squeeze=False)
    lo = min(np.min(y), min(np.min(c) for c in curves))
    hi = max(np.max(y), max(np.max(c) for c in curves))
    pad = 0.1 * (hi - lo + 1e-12)
    for i, (ax, f, title) in enumerate(zip(axes[0], curves, titles)):
        if reference is not None:
            ax.plot(x_grid, reference, ls="--", lw=1.0, color="0.6", label="linear spline (Thm 3.3)")
        ax.plot(x_grid, f, lw=1.6, color="C0")
        ax.scatter(x, y, color="k", s=16, zorder=3)
        if knots is not None and knots[i] is not None:
            k = np.asarray(knots[i])
            k = k[(k >= x_grid[0]) & (k <= x_grid[-1])]
            ax.plot(k, np.full_like(k, lo - 0.6 * pad), "|", color="C3", ms=8, label="kinks")
        ax.set_xlim(x_grid[0], x_grid[-1])
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("x")
        if i == 0:
            ax.set_ylabel("f(x)")
        if (reference is not None or knots is not None) and i == n - 1:
            ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def parallel_sparsity_figure(depths: Sequence[int], alpha_bars: Sequence[np.ndarray], active: Sequence[int],
                             n_points: int, gaps: Sequence[np.ndarray], rel_tol: float = 1e-3):
    """Savarese App. C: sorted |ᾱ_i|/max|ᾱ| per depth L (log scale), ‖ᾱ‖₀ against L with the Thm C.3
    bound N, and the Cor C.2 balance gap of the active sub-networks."""
    fig = Figure(figsize=(13, 3.6))
    a1, a2, a3 = fig.subplots(1, 3)
    for L, ab in zip(depths, alpha_bars):
        v = np.sort(np.abs(np.asarray(ab)))[::-1]
        v = v / v[0] if v.size and v[0] > 0 else v
        a1.semilogy(np.arange(1, v.size + 1), np.maximum(v, 1e-16), "o-", ms=3, label=f"L = {L}")
    a1.axhline(rel_tol, color="0.5", ls=":", lw=1, label=f"active threshold {rel_tol:g}")
    a1.axvline(n_points, color="k", ls="--", lw=1, label=f"N = {n_points}")
    a1.set_xlabel("sub-network (sorted)")
    a1.set_ylabel(r"$|\bar\alpha_i| / \max_j |\bar\alpha_j|$")
    a1.legend(fontsize=7)
    a2.plot(depths, active, "o-", label=r"active $\|\bar\alpha\|_0$")
    a2.axhline(n_points, color="k", ls="--", lw=1, label=f"Thm C.3 bound N = {n_points}")
    a2.set_xlabel("depth L")
    a2.set_ylabel("active sub-networks")
    a2.set_xticks(list(depths))
    a2.set_ylim(0, max(max(active), n_points) * 1.15 + 1)
    a2.legend(fontsize=7)
    a3.boxplot([np.asarray(g) if np.size(g) else np.zeros(1) for g in gaps], positions=list(depths))
    a3.set_xlabel("depth L")
    a3.set_ylabel("Cor C.2 gap (max−min)/max")
    a3.set_title("balance of active sub-networks", fontsize=9)
    fig.tight_layout()
    return fig
