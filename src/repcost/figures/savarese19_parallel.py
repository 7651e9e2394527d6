"""Savarese et al. 2019, App. C: parallel ReLU sub-networks of depth L = 2…5 and ℓ_{2/L} sparsity.

The sweep (preset savarese19-parallel[-quick]) trains k bias-free sub-networks summed by α with
λ·C_L(θ) (eq. 43); per depth the figure reports the active sub-networks ‖ᾱ‖₀ (Thm C.3: ≤ N), the
quasi-norm ‖ᾱ‖_{2/L}^{2/L} against C_L(θ) (Thm C.1: equal at a minimiser; C_L ≥ ‖ᾱ‖_{2/L}^{2/L}
always, by AM–GM) and the Cor C.2 balance gap of the active sub-networks.
"""

from __future__ import annotations

import numpy as np

from ..analysis.arrays import as_f64
from ..analysis.sparsity import l2L_quasinorm, parallel_alpha_normalised, parallel_balance
from ..plots.savarese import parallel_sparsity_figure
from . import Verdict

FIG_ID = "savarese19-parallel"
SORT_BY = "model.depth"
REL_TOL = 1e-3  # a sub-network is active when |ᾱ_i| > REL_TOL · max_j |ᾱ_j|
CLAIM = ("Paper (App. C): Thm C.3 — an optimum has ‖ᾱ‖₀ ≤ N (all optima when L ≥ 3); Thm C.1 — at a minimiser "
         "C_L(θ) = ‖ᾱ‖_{2/L}^{2/L}; Cor C.2 — ‖W_i^(1)‖² = … = ‖W_i^(L−1)‖² = α_i² in every sub-network; "
         "sparsity 'gets stronger with depth'.")


def compute(runs) -> list[dict]:
    """One row per depth; `_bar` (normalised α) and `_gap` (active sub-networks' Cor C.2 gaps) for the plot."""
    rows = []
    for run in runs:
        model, data, summary, spec = run.model, run.data, run.summary, run.spec
        N, L = data.x_train.shape[0], spec.model.depth
        Ws, alpha = [as_f64(w) for w in model.sub], as_f64(model.alpha)[0]
        bar = parallel_alpha_normalised(Ws, alpha)
        top = np.abs(bar).max(initial=0.0)
        on = np.abs(bar) > REL_TOL * top if top > 0 else np.zeros(bar.size, bool)
        gap = parallel_balance(Ws, alpha)[on]
        q = l2L_quasinorm(bar, L)
        rows.append({"depth_L": L, "n_points_N": N, "n_subnets_k": spec.model.n_subnets, "width_m": spec.model.width,
                     "active_subnets": int(on.sum()),
                     "active_at_1e-2": int(np.sum(np.abs(bar) > 1e-2 * top)) if top > 0 else 0,
                     "l2L_quasinorm": q, "C_L": summary["cost"],
                     "C_L_over_quasinorm": summary["cost"] / q if q > 0 else float("nan"),
                     "balance_gap_median_active": float(np.median(gap)) if gap.size else float("nan"),
                     "balance_gap_max_active": float(np.max(gap)) if gap.size else float("nan"),
                     "train_loss": summary["train_loss"], "objective": summary["objective"],
                     "critical_point": summary.get("critical_point"), "steps": summary["steps"],
                     "wall_time_s": summary["wall_time_s"], "lam": spec.train.lam, "path": run.path,
                     "_bar": bar, "_gap": gap})
    return rows


def plot(rows: list[dict]):
    """Normalised output weights per depth, with the active count against N, and the balance gaps."""
    return parallel_sparsity_figure([r["depth_L"] for r in rows], [r["_bar"] for r in rows],
                                    [r["active_subnets"] for r in rows], rows[0]["n_points_N"],
                                    [r["_gap"] for r in rows], rel_tol=REL_TOL)


def verdict(rows: list[dict], full: bool) -> Verdict:
    """Thm C.3 at L ≥ 3: at most N active sub-networks; Thm C.1's bound C_L ≥ ‖ᾱ‖ holds at every depth."""
    N = rows[0]["n_points_N"]
    lines = [f"  L = {r['depth_L']}: active = {r['active_subnets']:>2} (N = {N}), ‖ᾱ‖_{{2/L}}^{{2/L}} = "
             f"{r['l2L_quasinorm']:.4f}, C_L = {r['C_L']:.4f} (ratio {r['C_L_over_quasinorm']:.4f}), Cor C.2 gap "
             f"max = {r['balance_gap_max_active']:.2g}, critical point: {r['critical_point']}" for r in rows]
    bound = all(r["C_L"] >= r["l2L_quasinorm"] * (1 - 1e-9) for r in rows)
    sparse = all(r["active_subnets"] <= N for r in rows if r["depth_L"] >= 3)
    ok = bound and sparse
    if not full and not ok:
        return Verdict(None, "\n".join(lines + ["  (the quick variant stops before the sparse minimum: "
                                                "make fig-savarese19-parallel FULL=1)"]))
    return Verdict(ok, "\n".join(lines + [f"  C_L ≥ ‖ᾱ‖ at every depth: {'yes' if bound else 'NO'}; "
                                          f"≤ N active for L ≥ 3: {'yes' if sparse else 'NO'}"]))
