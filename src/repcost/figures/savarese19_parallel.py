"""Savarese et al. 2019, App. C: parallel ReLU sub-networks of depth L = 2…5 and ℓ_{2/L} sparsity.

The sweep (preset savarese19-parallel[-quick]) trains k bias-free sub-networks summed by α with
λ·C_L(θ) (eq. 43); per depth the figure reports the active sub-networks ‖ᾱ‖₀ (Thm C.3: ≤ N), the
quasi-norm ‖ᾱ‖_{2/L}^{2/L} against C_L(θ) (Thm C.1: equal at a minimiser; C_L ≥ ‖ᾱ‖_{2/L}^{2/L}
always, by AM–GM) and the Cor C.2 balance gap of the active sub-networks.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..analysis.arrays import as_f64
from ..analysis.costs import l2L_quasinorm, parallel_alpha_normalised, parallel_balance
from . import Verdict, quick_verdict

FIG_ID = "savarese19-parallel"
REL_TOL = 1e-3  # a sub-network is active when |ᾱ_i| > REL_TOL · max_j |ᾱ_j|
CLAIM = ("Paper (App. C): Thm C.3 — an optimum has ‖ᾱ‖₀ ≤ N (all optima when L ≥ 3); Thm C.1 — at a minimiser "
         "C_L(θ) = ‖ᾱ‖_{2/L}^{2/L}; Cor C.2 — ‖W_i^(1)‖² = … = ‖W_i^(L−1)‖² = α_i² in every sub-network; "
         "sparsity 'gets stronger with depth'.")


def compute(runs) -> list[dict]:
    """One row per depth; `_bar` (normalised α) and `_gap` (active sub-networks' Cor C.2 gaps) for the plot."""
    rows = []
    for run in sorted(runs, key=lambda r: r.spec.model.depth):
        spec, cost = run.spec, run.summary["cost"]
        N, L = run.data.x_train.shape[0], spec.model.depth
        Ws, alpha = [as_f64(w) for w in run.model.sub], as_f64(run.model.alpha)[0]
        bar = parallel_alpha_normalised(Ws, alpha)
        top = np.abs(bar).max(initial=0.0)
        on = np.abs(bar) > REL_TOL * top
        gap = parallel_balance(Ws, alpha)[on]
        q = l2L_quasinorm(bar, L)
        rows.append({"depth_L": L, "n_points_N": N, "n_subnets_k": spec.model.n_subnets, "width_m": spec.model.width,
                     "active_subnets": int(on.sum()),
                     "active_at_1e-2": int(np.sum(np.abs(bar) > 1e-2 * top)),
                     "l2L_quasinorm": q, "C_L": cost, "C_L_over_quasinorm": cost / q if q > 0 else float("nan"),
                     "balance_gap_median_active": float(np.median(gap)) if gap.size else float("nan"),
                     "balance_gap_max_active": float(np.max(gap)) if gap.size else float("nan"),
                     **run.columns("objective"), "lam": spec.train.lam, "path": run.path, "_bar": bar, "_gap": gap})
    return rows


def plot(rows: list[dict]):
    """Sorted |ᾱ_i|/max|ᾱ| per depth L (log scale), ‖ᾱ‖₀ against L with the Thm C.3 bound N, and the Cor C.2
    balance gaps of the active sub-networks."""
    depths, active, N = [r["depth_L"] for r in rows], [r["active_subnets"] for r in rows], rows[0]["n_points_N"]
    fig = Figure(figsize=(13, 3.6), layout="tight")
    a1, a2, a3 = fig.subplots(1, 3)
    for r in rows:
        v = np.sort(np.abs(r["_bar"]))[::-1]
        v = v / v[0] if v.size and v[0] > 0 else v
        a1.semilogy(np.arange(1, v.size + 1), np.maximum(v, 1e-16), "o-", ms=3, label=f"L = {r['depth_L']}")
    a1.axhline(REL_TOL, color="0.5", ls=":", lw=1, label=f"active threshold {REL_TOL:g}")
    a1.axvline(N, color="k", ls="--", lw=1, label=f"N = {N}")
    a1.set(xlabel="sub-network (sorted)", ylabel=r"$|\bar\alpha_i| / \max_j |\bar\alpha_j|$")
    a1.legend(fontsize=7)
    a2.plot(depths, active, "o-", label=r"active $\|\bar\alpha\|_0$")
    a2.axhline(N, color="k", ls="--", lw=1, label=f"Thm C.3 bound N = {N}")
    a2.set(xlabel="depth L", ylabel="active sub-networks", xticks=depths, ylim=(0, max(*active, N) * 1.15 + 1))
    a2.legend(fontsize=7)
    a3.boxplot([r["_gap"] if r["_gap"].size else np.zeros(1) for r in rows], positions=depths)
    a3.set(xlabel="depth L", ylabel="Cor C.2 gap (max−min)/max")
    a3.set_title("balance of active sub-networks", fontsize=9)
    return fig


def verdict(rows: list[dict], full: bool) -> Verdict:
    """Thm C.3 at L ≥ 3: at most N active sub-networks; Thm C.1's bound C_L ≥ ‖ᾱ‖ holds at every depth."""
    N = rows[0]["n_points_N"]
    lines = [f"  L = {r['depth_L']}: active = {r['active_subnets']:>2} (N = {N}), ‖ᾱ‖_{{2/L}}^{{2/L}} = "
             f"{r['l2L_quasinorm']:.4f}, C_L = {r['C_L']:.4f} (ratio {r['C_L_over_quasinorm']:.4f}), Cor C.2 gap "
             f"max = {r['balance_gap_max_active']:.2g}, critical point: {r['critical_point']}" for r in rows]
    bound = all(r["C_L"] >= r["l2L_quasinorm"] * (1 - 1e-9) for r in rows)
    sparse = all(r["active_subnets"] <= N for r in rows if r["depth_L"] >= 3)
    lines.append(f"  C_L ≥ ‖ᾱ‖ at every depth: {'yes' if bound else 'NO'}; ≤ N active for L ≥ 3: {'yes' if sparse else 'NO'}")
    return quick_verdict(bound and sparse, lines, full, FIG_ID)
