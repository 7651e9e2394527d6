"""Jacot 2023 Fig 1: spectra of hidden representations, weights and Jacobians of a deep fc net on a rank-5 task.

Paper (Fig 1 caption): L = 10, width 100, MSE on a rank-5 f*: R^50 → R^50, N = 2000, λ = 2e-4;
‖W‖²/L = 12.8 at the end of training; "The middle layers are approximately rank 5". We also
check Prop 12 balancedness (‖W_ℓ‖² + ‖b_ℓ‖² = ‖W_{ℓ+1}‖²) at the end of training.
Quick variant: N = 500, width 50, a few thousand steps (see configs/experiment/jacot23-fig1-quick.yaml).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..analysis import layer_balance
from ..analysis.hooks import analysis_points
from ..analysis.spectra import gap_rank, numerical_rank
from ..data.rank_k import true_jacobian_ranks
from ..plots.jacot23 import spectra_figure
from . import Verdict

FIG_ID = "jacot23-fig1"
SORT_BY = None
TARGET = 0.1  # middle layers count as rank k when s_{k+1}/s_k < TARGET
CLAIM = "Paper: ‖W‖²/L = 12.8 at the end of training; the middle layers are approximately rank 5 (s6/s5 < 0.1)."


def ratio(s: np.ndarray, k: int) -> float:
    """s_{k+1}/s_k: the gap that says 'rank k' (small = the spectrum drops after k values)."""
    return float(s[k] / s[k - 1]) if s[k - 1] > 0 else float("nan")


def compute(runs) -> list[dict]:
    """Rows per hidden layer, weight matrix, Jacobian point and balance pair, then a summary row (the first run)."""
    run = runs[0]
    model, data, summ, spec = run.model, run.data, run.summary, run.spec
    k, L = data.meta["k"], model.depth
    z = {n: np.load(Path(run.path) / "analysis" / f"{n}.npz") for n in ("hidden", "weights", "jacobian")}
    hidden = [z["hidden"][f"s_post{ell}"] for ell in range(1, L)]
    weights = [z["weights"][f"W{ell}"] for ell in range(1, L + 1)]
    jac = z["jacobian"]["jacobian_s"]
    net_r = numerical_rank(jac, 1e-3)
    true_r = true_jacobian_ranks(spec.data, analysis_points(spec.analysis, data)[: len(jac)])
    rows = []
    for ell, s in enumerate(hidden, start=1):
        sn = s / s[0]
        r, drop = gap_rank(s)
        rows.append({"kind": "hidden", "layer": ell, **{f"s{i + 1}/s1": float(sn[i]) for i in range(min(10, len(s)))},
                     f"s{k + 1}/s{k}": ratio(s, k), "gap_rank": r, "gap_ratio": drop})
    for ell, s in enumerate(weights, start=1):
        rows.append({"kind": "weight", "layer": ell, **{f"s{i + 1}": float(s[i]) for i in range(min(10, len(s)))},
                     "sq_norm": float(np.sum(s ** 2))})
    for p, s in enumerate(jac):
        rows.append({"kind": "jacobian", "point": p, **{f"s{i + 1}": float(s[i]) for i in range(min(10, len(s)))},
                     f"s{k + 1}/s{k}": ratio(s, k), "rank": int(net_r[p]), "true_rank": int(true_r[p])})
    bal = layer_balance(model)
    rows += [{"kind": "balance", "layer": b.layer, "lhs": b.u, "rhs": b.v, "gap": b.gap} for b in bal]
    middle = [ell for ell in range(1, L) if L / 4 <= ell <= 3 * L / 4]
    npd = summ["param_sq_norm_per_depth"]
    rows.append({"kind": "summary", "k": k, "param_sq_norm_per_depth": npd, "train_loss": summ["train_loss"],
                 "test_loss": summ.get("test_loss"), "steps": summ["steps"], "wall_time_s": summ["wall_time_s"],
                 "middle_layers": " ".join(map(str, middle)),
                 "middle_max_ratio": max(ratio(hidden[ell - 1], k) for ell in middle),
                 "jacobian_rank_equals_true": int(np.sum(net_r == true_r)), "n_points": len(jac),
                 "prop12_gap_max": max(b.gap for b in bal), "critical_point": summ.get("critical_point"),
                 "_hidden": hidden, "_weights": weights, "_jac": jac,
                 "_title": f"L={L}, width {spec.model.width}, N={data.x_train.shape[0]}, λ={spec.train.lam:g}, "
                           f"steps={summ['steps']}, ‖θ‖²/L={npd:.1f}, train MSE={summ['train_loss']:.3g}"})
    return rows


def plot(rows: list[dict]):
    """Panels A (hidden spectra), B (weights), C (Jacobians), the true rank k dotted."""
    s = rows[-1]
    return spectra_figure(s["_hidden"], s["_weights"], s["_jac"], k=s["k"], title=s["_title"])


def verdict(rows: list[dict], full: bool) -> Verdict:
    """Reproduced when every middle layer has s_{k+1}/s_k below TARGET."""
    s, k = rows[-1], rows[-1]["k"]
    lines = [f"  layer {r['layer']}: s{k + 1}/s{k} = {r[f's{k + 1}/s{k}']:.3g}" for r in rows if r["kind"] == "hidden"]
    lines += [f"  ‖θ‖²/L = {s['param_sq_norm_per_depth']:.2f}; middle layers {s['middle_layers']}: max s{k + 1}/s{k} = "
              f"{s['middle_max_ratio']:.3g}; Jacobian rank = f*'s at {s['jacobian_rank_equals_true']}/{s['n_points']} "
              f"points; Prop 12 gap max {s['prop12_gap_max']:.3g}; critical point: {s['critical_point']}"]
    ok = bool(s["middle_max_ratio"] < TARGET)
    if not ok and not full:
        return Verdict(None, "\n".join(lines + ["  (the quick variant's N = 500 does not identify f*: "
                                                "make fig-jacot23-fig1 FULL=1)"]))
    return Verdict(ok, "\n".join(lines))
