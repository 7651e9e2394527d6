"""Jacot 2023 Fig 1: spectra of hidden representations, weights and Jacobians of a deep fc net on a rank-5 task.

Paper (Fig 1 caption): L = 10, width 100, MSE on a rank-5 f*: R^50 → R^50, N = 2000, λ = 2e-4;
‖W‖²/L = 12.8 at the end of training; "The middle layers are approximately rank 5". We also
check Prop 12 balancedness (‖W_ℓ‖² + ‖b_ℓ‖² = ‖W_{ℓ+1}‖²) at the end of training.
The full preset trains seeds 0, 1, 2: where the run lands decides the rank verdict, so the verdict is
the pass rate over the seeds (reproduced when most pass), and the plot shows seed 0, the first one.
Quick variant (configs/experiment/jacot23-fig1-quick.yaml): L = 10 on a rank-3 f*: R^20 → R^20, width 40,
N = 500, 14k steps, seeds 0, 1, 2, judged by the same rule (`full` changes nothing in the verdict).
"""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from ..analysis import layer_balance
from ..analysis.hooks import analysis_points
from ..analysis.spectra import gap_rank, numerical_rank
from ..data.rank_k import true_jacobian_ranks
from . import per_seed

FIG_ID = "jacot23-fig1"
TARGET = 0.1  # middle layers count as rank k when s_{k+1}/s_k < TARGET
CLAIM = "Paper: ‖W‖²/L = 12.8 at the end of training; the middle layers are approximately rank 5 (s6/s5 < 0.1)."


def ratio(s: np.ndarray, k: int) -> float:
    """s_{k+1}/s_k: the gap that says 'rank k' (small = the spectrum drops after k values)."""
    return float(s[k] / s[k - 1]) if s[k - 1] > 0 else float("nan")


def compute(runs) -> list[dict]:
    """Per run (seed): rows per hidden layer, weight matrix, Jacobian point and balance pair, then its summary row."""
    return [row for run in runs for row in _run_rows(run)]


def spectra(run) -> tuple[list, list, np.ndarray, np.ndarray]:
    """A run's spectra from its analysis files: each hidden layer's and weight matrix's singular values, the
    Jacobian's at the analysis points, and f*'s Jacobian ranks at those points."""
    L, z = run.model.depth, run.analysis
    jac = z["jacobian"]["jacobian_s"]
    return ([z["hidden"][f"s_post{ell}"] for ell in range(1, L)], [z["weights"][f"W{ell}"] for ell in range(1, L + 1)],
            jac, true_jacobian_ranks(run.spec.data, analysis_points(run.spec.analysis, run.data)[: len(jac)]))


def _run_rows(run) -> list[dict]:
    model, data, summ, spec = run.model, run.data, run.summary, run.spec
    k, L = data.meta["k"], model.depth
    hidden, weights, jac, true_r = spectra(run)
    net_r = numerical_rank(jac, 1e-3)
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
    rows.append({"kind": "summary", "k": k, **run.columns("param_sq_norm_per_depth", "test_loss"),
                 "middle_layers": " ".join(map(str, middle)),
                 "middle_max_ratio": max(ratio(hidden[ell - 1], k) for ell in middle),
                 "jacobian_rank_equals_true": int(np.sum(net_r == true_r)), "n_points": len(jac),
                 "prop12_gap_max": max(b.gap for b in bal),
                 "_hidden": hidden, "_weights": weights, "_jac": jac,
                 "_title": f"L={L}, width {spec.model.width}, N={data.x_train.shape[0]}, λ={spec.train.lam:g}, "
                           f"steps={summ['steps']}, ‖θ‖²/L={npd:.1f}, train MSE={summ['train_loss']:.3g}"})
    return [{"seed": spec.seed, **r} for r in rows]


def plot(rows: list[dict]):
    """Panels A (hidden spectra s_i/s_1), B (weight spectra), C (Jacobian spectra at the analysis points) of the
    first run (seed 0), the first 10 values of each, the true rank k dotted."""
    s = next(r for r in rows if r["kind"] == "summary")
    k, i = s["k"], np.arange(1, 11)
    fig = Figure(figsize=(14, 4), layout="tight")
    axA, axB, axC = fig.subplots(1, 3)
    for ell, (h, c) in enumerate(zip(s["_hidden"], colormaps["viridis"](np.linspace(0, 1, len(s["_hidden"])))), 1):
        axA.semilogy(i[: min(10, len(h))], h[:10] / h[0], "o-", color=c, ms=3, label=f"ℓ={ell}")
    axA.set(title="A: hidden representations (centred), $s_i/s_1$", xlabel="i", ylim=(1e-4, 1.5))
    axA.legend(fontsize=6, ncol=2)
    for ell, (w, c) in enumerate(zip(s["_weights"], colormaps["viridis"](np.linspace(0, 1, len(s["_weights"])))), 1):
        axB.semilogy(np.arange(1, len(w) + 1), w, "-", color=c, label=f"$W_{{{ell}}}$")
    axB.set(title="B: weight matrices, $s_i$", xlabel="i")
    axB.legend(fontsize=6, ncol=2)
    for p, j in enumerate(s["_jac"]):  # one colour per input point
        axC.semilogy(i[: min(10, len(j))], j[:10], "o-", ms=3, alpha=0.7, label="one line per point $x_p$" if p == 0 else None)
    axC.set(title="C: Jacobian $Jf(x_p)$ at the analysis points, $s_i$", xlabel="i")
    for ax in (axA, axC):
        ax.axvline(k + 0.5, color="grey", ls=":", lw=1, label=f"true rank k = {k} (dotted)")
    axC.legend(fontsize=6)
    fig.suptitle(f"seed {s['seed']}: {s['_title']}")
    return fig


@per_seed(lambda rows: f"middle layers rank {next(r['k'] for r in rows if r['kind'] == 'summary')}")
def verdict(rows: list[dict]) -> tuple[bool, list[str]]:
    """Per seed (the full and the quick preset train three): rank k when every middle layer has s_{k+1}/s_k below
    TARGET; reproduced when most seeds are."""
    s = next(r for r in rows if r["kind"] == "summary")
    k, hidden = s["k"], [r for r in rows if r["kind"] == "hidden"]
    ok = s["middle_max_ratio"] < TARGET
    return ok, [f"  ‖θ‖²/L = {s['param_sq_norm_per_depth']:.2f}, train MSE {s['train_loss']:.3g}, "
                f"test MSE {s['test_loss']:.3g}",
                f"    s{k + 1}/s{k} per hidden layer: " + " ".join(f"{r[f's{k + 1}/s{k}']:.3g}" for r in hidden),
                f"    middle layers {s['middle_layers']}: max s{k + 1}/s{k} = {s['middle_max_ratio']:.3g} "
                f"({'' if ok else 'not '}rank {k}); Jacobian rank = f*'s at {s['jacobian_rank_equals_true']}/"
                f"{s['n_points']} points; Prop 12 gap max {s['prop12_gap_max']:.3g}; critical point: {s['critical_point']}"]
