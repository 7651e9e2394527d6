"""Jacot 2023 §4 / App. D: rank recovery against depth on the rank-k task, beside a KRR baseline.

Paper: large depth biases the net towards low rank; "there is a range of depths ... where we expect
rank recovery", "too small depths can lead to an overestimation of the rank" (§4, after Prop 5),
‖W‖²/L approximates the rank (Thm 1, Prop 3), and KRR "typically overestimate[s] the true rank"
(footnote 1; App. D: its Jacobian rank is min{Rank(X − x), Rank Y} = min{N, d_in, d_out}).
For each depth: ‖θ‖²/L, the rank of the lowest-rank hidden layer (the bottleneck) and the max
Jacobian rank over the analysis points; ranks count s_i > TAU · s_1.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from repcost.analysis.hooks import analysis_points
from repcost.analysis.krr import fit_krr
from repcost.analysis.spectra import numerical_rank
from repcost.data.rank_k import true_jacobian_ranks
from repcost.figures import figure_args, load_run, run_figure, save_figure, sweep_for
from repcost.plots.jacot23 import depth_figure

FIG = "jacot23-depth"
TAU = 1e-2  # rank threshold on s_i/s_1 (the summary's numerical ranks use 1e-3, also reported)


def main():
    a = figure_args(__doc__).parse_args()
    t0 = time.time()
    runs = sweep_for(FIG, a)
    table, krr_cache = [], {}
    for r in sorted(runs, key=lambda r: (int(r["data.n_train"]), int(r["model.depth"]))):
        model, data, summ, spec = load_run(r["path"])
        L, N, k = model.depth, data.x_train.shape[0], data.meta["k"]
        z = {n: np.load(Path(r["path"]) / "analysis" / f"{n}.npz") for n in ("hidden", "jacobian")}
        hidden = [z["hidden"][f"s_post{ell}"] for ell in range(1, L)]
        ranks = [numerical_rank(s, TAU) for s in hidden]
        b = int(np.argmin(ranks))
        jac = z["jacobian"]["jacobian_s"]
        jac_r = numerical_rank(jac, TAU)
        true_r = true_jacobian_ranks(spec.data, analysis_points(spec.analysis, data)[: len(jac)])
        if N not in krr_cache:
            m = fit_krr(data.x_train.numpy(), data.y_train.numpy(), ridge=1e-8)
            xq = data.x_train.numpy()[: spec.analysis.n_points]  # the points the net's Jacobians were taken at
            s = m.jacobian_spectra(xq)
            krr_cache[N] = (int(np.max(numerical_rank(s, TAU))), int(np.max(numerical_rank(s, 1e-3))),
                            float(np.median(s[:, k] / s[:, k - 1])),
                            float(np.mean(np.sum((m.predict(data.x_test.numpy()) - data.y_test.numpy()) ** 2, 1))))
        kr, kr3, kgap, ktest = krr_cache[N]
        table.append({"depth": L, "N": N, "norm_per_depth": summ["param_sq_norm_per_depth"],
                      "bottleneck_layer": b + 1, "bottleneck_rank": ranks[b],
                      "bottleneck_gap": float(hidden[b][k] / hidden[b][k - 1]),
                      "hidden_ranks": " ".join(map(str, ranks)),
                      "jacobian_rank": int(np.max(jac_r)),
                      "jacobian_rank_1e-3": summ.get("jacobian.rank_max"),
                      "jacobian_gap_median": float(np.median(jac[:, k] / jac[:, k - 1])),
                      "jacobian_rank_equals_true": int(np.sum(jac_r == true_r)),
                      "true_jacobian_ranks": " ".join(map(str, true_r)),
                      "krr_jacobian_rank": kr, "krr_jacobian_rank_1e-3": kr3, "krr_jacobian_gap_median": kgap,
                      "train_loss": summ["train_loss"], "test_loss": summ.get("test_loss"), "krr_test_loss": ktest,
                      "steps": summ["steps"], "wall_time_s": summ["wall_time_s"]})
    save_figure(depth_figure(table, k), FIG, table, a)

    print(f"\n== {FIG} ({'full' if a.full else 'quick'}), {time.time() - t0:.0f} s; true rank k = {k}; "
          f"ranks count s_i > {TAU:g}·s_1; gap = s_{k + 1}/s_{k}")
    print("paper: deeper nets recover the rank (shallow ones overestimate it); ‖θ‖²/L ~ rank; "
          "KRR's Jacobian rank is min{N, d_in, d_out} (App. D)")
    for t in table:
        print(f"   N={t['N']} L={t['depth']:2d}: ‖θ‖²/L={t['norm_per_depth']:7.2f}  bottleneck layer {t['bottleneck_layer']} "
              f"rank {t['bottleneck_rank']} (gap {t['bottleneck_gap']:.2g})  Jacobian rank {t['jacobian_rank']} "
              f"(1e-3: {t['jacobian_rank_1e-3']}; = f*'s at {t['jacobian_rank_equals_true']}/{len(t['true_jacobian_ranks'].split())} points)  train/test MSE "
              f"{t['train_loss']:.3g}/{t['test_loss']:.3g}")
    for N, (kr, kr3, kgap, ktest) in krr_cache.items():
        print(f"   KRR (Gaussian, median bandwidth) N={N}: Jacobian rank {kr} (1e-3: {kr3}), gap {kgap:.2g}, "
              f"test MSE {ktest:.3g}; min(N, d_in, d_out) = {min(N, data.d_in, data.d_out)}")


if __name__ == "__main__":
    run_figure(main)
