"""Jacot 2023 Fig 1: spectra of hidden representations, weights and Jacobians of a deep fc net on a rank-5 task.

Paper (Fig 1 caption): L = 10, width 100, MSE on a rank-5 f*: R^50 → R^50, N = 2000, λ = 2e-4;
‖W‖²/L = 12.8 at the end of training; "The middle layers are approximately rank 5". We also
check Prop 12 balancedness (‖W_ℓ‖² + ‖b_ℓ‖² = ‖W_{ℓ+1}‖²) at the end of training.
Quick variant: N = 500, width 50, a few thousand steps (see configs/experiment/jacot23-fig1-quick.yaml).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from repcost.analysis import layer_balance
from repcost.analysis.hooks import analysis_points
from repcost.analysis.spectra import gap_rank, numerical_rank
from repcost.data.rank_k import true_jacobian_ranks
from repcost.figures import figure_args, load_run, run_figure, save_figure, sweep_for
from repcost.plots.jacot23 import spectra_figure

FIG = "jacot23-fig1"


def ratio(s: np.ndarray, k: int) -> float:
    """s_{k+1}/s_k: the gap that says 'rank k' (small = the spectrum drops after k values)."""
    return float(s[k] / s[k - 1]) if s[k - 1] > 0 else float("nan")


def main():
    a = figure_args(__doc__).parse_args()
    t0 = time.time()
    runs = sweep_for(FIG, a)
    run = runs[0]
    model, data, summ, spec = load_run(run["path"])
    k, L = data.meta["k"], model.depth
    z = {n: np.load(Path(run["path"]) / "analysis" / f"{n}.npz") for n in ("hidden", "weights", "jacobian")}
    hidden = [z["hidden"][f"s_post{ell}"] for ell in range(1, L)]
    weights = [z["weights"][f"W{ell}"] for ell in range(1, L + 1)]
    jac = z["jacobian"]["jacobian_s"]
    bal = layer_balance(model)
    net_r = numerical_rank(jac, 1e-3)
    true_r = true_jacobian_ranks(spec.data, analysis_points(spec.analysis, data)[: len(jac)])  # where the net's were taken

    rows = []
    for ell, s in enumerate(hidden, start=1):
        sn = s / s[0]
        r, drop = gap_rank(s)
        rows.append({"kind": "hidden", "layer": ell, **{f"s{i + 1}/s1": float(sn[i]) for i in range(10)},
                     f"s{k + 1}/s{k}": ratio(s, k), "gap_rank": r, "gap_ratio": drop})
    for ell, s in enumerate(weights, start=1):
        rows.append({"kind": "weight", "layer": ell, **{f"s{i + 1}": float(s[i]) for i in range(10)},
                     "sq_norm": float(np.sum(s ** 2))})
    for p, s in enumerate(jac):
        rows.append({"kind": "jacobian", "point": p, **{f"s{i + 1}": float(s[i]) for i in range(10)},
                     f"s{k + 1}/s{k}": ratio(s, k), "rank": int(net_r[p]), "true_rank": int(true_r[p])})
    for b in bal:
        rows.append({"kind": "balance", "layer": b.layer, "lhs": b.u, "rhs": b.v, "gap": b.gap})

    middle = [ell for ell in range(1, L) if L / 4 <= ell <= 3 * L / 4]
    mid_ratios = [ratio(hidden[ell - 1], k) for ell in middle]
    npd = summ["param_sq_norm_per_depth"]
    rows.append({"kind": "summary", "param_sq_norm_per_depth": npd, "train_loss": summ["train_loss"],
                 "test_loss": summ.get("test_loss"), "steps": summ["steps"], "wall_time_s": summ["wall_time_s"],
                 "middle_layers": " ".join(map(str, middle)), "middle_max_ratio": max(mid_ratios)})
    title = (f"{'full' if a.full else 'quick'}: L={L}, width {spec.model.width}, N={data.x_train.shape[0]}, "
             f"λ={spec.train.lam:g}, steps={summ['steps']}, ‖θ‖²/L={npd:.1f}, train MSE={summ['train_loss']:.3g}")
    save_figure(spectra_figure(hidden, weights, jac, k=k, title=title), FIG, rows, a)

    print(f"\n== {FIG} ({'full' if a.full else 'quick'}), {time.time() - t0:.0f} s (training {summ['wall_time_s']:.0f} s)")
    print(f"paper: ‖W‖²/L = 12.8 at the end of training      measured: {npd:.2f} "
          f"(train MSE {summ['train_loss']:.3g}, test MSE {summ.get('test_loss', float('nan')):.3g})")
    print(f"paper: middle layers approximately rank {k} (target s{k + 1}/s{k} < 0.1)")
    for ell, s in enumerate(hidden, start=1):
        tag = " (middle)" if ell in middle else ""
        r, drop = gap_rank(s)
        print(f"   layer {ell}{tag}: s{k + 1}/s{k} = {ratio(s, k):.3g}   s_i/s_1 (i ≤ 8) = "
              + " ".join(f"{v:.2g}" for v in (s / s[0])[:8]) + f"   largest drop after s{r} (s{r + 1}/s{r} = {drop:.2g})")
    print(f"   measured max over middle layers {middle}: {max(mid_ratios):.3g} -> "
          + ("rank-5 middle layers REPRODUCED" if max(mid_ratios) < 0.1 else "NOT reproduced (< 0.1 needed)"))
    jr = [ratio(s, k) for s in jac]
    print(f"Jacobian at {len(jac)} points: s{k + 1}/s{k} median {np.median(jr):.3g}, max {np.max(jr):.3g}; "
          f"numerical rank (s_i > 1e-3 s_1) max {summ.get('jacobian.rank_max')}")
    print(f"   per point, net: {' '.join(map(str, net_r))}; f*: {' '.join(map(str, true_r))} "
          f"(equal at {int(np.sum(net_r == true_r))}/{len(jac)} points)")
    gaps = np.array([b.gap for b in bal])
    print(f"Prop 12 balancedness ‖W_ℓ‖²+‖b_ℓ‖² = ‖W_ℓ+1‖²: relative gap max {gaps.max():.3g}, mean {gaps.mean():.3g} "
          f"(0 at a critical point)")


if __name__ == "__main__":
    run_figure(main)
