"""Jacot 2023 §4 / App. D: rank recovery against depth on the rank-k task, beside a KRR baseline.

Paper: large depth biases the net towards low rank; "there is a range of depths ... where we expect
rank recovery", "too small depths can lead to an overestimation of the rank" (§4, after Prop 5),
‖W‖²/L approximates the rank (Thm 1, Prop 3), and KRR "typically overestimate[s] the true rank"
(footnote 1; App. D: its Jacobian rank is min{Rank(X − x), Rank Y} = min{N, d_in, d_out}).
For each depth: ‖θ‖²/L, the rank of the lowest-rank hidden layer (the bottleneck) and the max
Jacobian rank over the analysis points; ranks count s_i > TAU · s_1. The full preset trains seed 0, the quick
one (rank-3 f*: R^10 → R^10, width 40, N = 500, L = 2, 4, 6) seeds 0, 1, 2: each seed is judged by the same
rule, the verdict is the pass rate, and the plot shows the first seed.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..analysis.krr import fit_krr
from ..analysis.spectra import numerical_rank, singular_values
from . import per_seed
from .jacot23_fig1 import spectra

FIG_ID = "jacot23-depth"
TAU = 1e-2  # rank threshold on s_i/s_1 (the summary's numerical ranks use 1e-3, also reported)
CLAIM = ("Paper: deeper nets recover the rank (shallow ones overestimate it); ‖θ‖²/L ~ rank; KRR's Jacobian rank "
         "is min{N, d_in, d_out} (App. D).")


def compute(runs) -> list[dict]:
    """One row per (seed, N, depth): norms, hidden and Jacobian ranks against f*'s, and the KRR baseline of that N."""
    table, krr = [], {}
    for run in sorted(runs, key=lambda r: (r.spec.seed, r.data.x_train.shape[0], r.model.depth)):
        data, summ, spec = run.data, run.summary, run.spec
        L, N, k = run.model.depth, data.x_train.shape[0], data.meta["k"]
        hidden, _, jac, true_r = spectra(run)
        ranks = [numerical_rank(s, TAU) for s in hidden]
        b = int(np.argmin(ranks))
        jac_r = numerical_rank(jac, TAU)
        with np.errstate(divide="ignore", invalid="ignore"):  # a net of rank < k has s_k = 0: the gap is nan
            jac_gap = float(np.median(jac[:, k] / jac[:, k - 1]))
        if N not in krr:  # the KRR baseline of this N: its Jacobians at the points the net's were taken at
            m = fit_krr(data.x_train.numpy(), data.y_train.numpy(), ridge=1e-8)
            s = singular_values(m.jacobians(data.x_train.numpy()[:spec.analysis.n_points]))
            krr[N] = (int(np.max(numerical_rank(s, TAU))), int(np.max(numerical_rank(s, 1e-3))),
                      float(np.median(s[:, k] / s[:, k - 1])),
                      float(np.mean(np.sum((m.predict(data.x_test.numpy()) - data.y_test.numpy()) ** 2, 1))))
        kr, kr3, kgap, ktest = krr[N]
        table.append({"seed": spec.seed, "depth": L, "N": N, "k": k, "d_in": data.d_in, "d_out": data.d_out,
                      "norm_per_depth": summ["param_sq_norm_per_depth"], "bottleneck_layer": b + 1,
                      "bottleneck_rank": ranks[b], "bottleneck_gap": float(hidden[b][k] / hidden[b][k - 1]),
                      "hidden_ranks": " ".join(map(str, ranks)), "jacobian_rank": int(np.max(jac_r)),
                      "jacobian_rank_1e-3": summ.get("jacobian.rank_max"),
                      "jacobian_gap_median": jac_gap,
                      "jacobian_rank_equals_true": int(np.sum(jac_r == true_r)),
                      "true_jacobian_ranks": " ".join(map(str, true_r)),
                      "krr_jacobian_rank": kr, "krr_jacobian_rank_1e-3": kr3, "krr_jacobian_gap_median": kgap,
                      "krr_test_loss": ktest, **run.columns("test_loss")})
    return table


def plot(rows: list[dict]):
    """‖θ‖²/L, the bottleneck layer's rank and the Jacobian rank against depth (one line per N), with the KRR
    baseline's Jacobian rank as a horizontal line, of the first seed (the quick preset trains three)."""
    k = rows[0]["k"]
    fig = Figure(figsize=(12, 4), layout="tight")
    ax1, ax2 = fig.subplots(1, 2)
    for j, N in enumerate(sorted({r["N"] for r in rows})):
        rr = sorted([r for r in rows if r["N"] == N and r.get("seed") == rows[0].get("seed")], key=lambda r: r["depth"])
        d = [r["depth"] for r in rr]
        ax1.plot(d, [r["norm_per_depth"] for r in rr], "o-", color=f"C{j}", label=f"N={N}")
        ax2.plot(d, [r["bottleneck_rank"] for r in rr], "o-", color=f"C{j}", label=f"bottleneck layer, N={N}")
        ax2.plot(d, [r["jacobian_rank"] for r in rr], "s--", color=f"C{j}", label=f"Jacobian (max), N={N}")
        ax2.axhline(rr[0]["krr_jacobian_rank"], color=f"C{j}", ls=":", label=f"KRR Jacobian, N={N}")
    ax1.axhline(k, color="grey", ls=":", label=f"true rank k={k}")
    ax1.set(xlabel="depth L", ylabel="‖θ‖²/L", title="rescaled parameter norm", yscale="log")
    ax1.legend(fontsize=7)
    ax2.axhline(k, color="grey", ls="-", lw=0.8)
    ax2.set(xlabel="depth L", ylabel="rank", title="rank recovery vs depth", yscale="log")
    ax2.legend(fontsize=7)
    return fig


@per_seed("reproduced")
def verdict(rows: list[dict]) -> tuple[bool, list[str]]:
    """Per seed (the full preset trains one, the quick one three): reproduced when a deeper net recovers f*'s
    Jacobian ranks at every point, the shallowest overestimates the rank, and KRR's Jacobian rank is above k;
    over several seeds, when most seeds are."""
    lines = [f"  N={t['N']} L={t['depth']:2d}: ‖θ‖²/L={t['norm_per_depth']:7.2f}  bottleneck layer "
             f"{t['bottleneck_layer']} rank {t['bottleneck_rank']} (gap {t['bottleneck_gap']:.2g})  Jacobian rank "
             f"{t['jacobian_rank']} (= f*'s at {t['jacobian_rank_equals_true']}/{len(t['true_jacobian_ranks'].split())} "
             f"points)  KRR Jacobian rank {t['krr_jacobian_rank']}; critical point: {t['critical_point']}" for t in rows]
    k, shallow = rows[0]["k"], min(t["depth"] for t in rows)
    recovered = any(t["depth"] > shallow and t["jacobian_rank_equals_true"] == len(t["true_jacobian_ranks"].split())
                    for t in rows)
    over = all(t["jacobian_rank"] > k for t in rows if t["depth"] == shallow)
    krr_over = all(t["krr_jacobian_rank"] > k for t in rows)
    lines.append(f"  a deeper net recovers f*'s ranks: {recovered}; L = {shallow} overestimates: {over}; "
                 f"KRR overestimates: {krr_over}")
    return recovered and over and krr_over, lines
