"""Jacot 2023 Fig 3: autoencoders with λ = 1e-4 are naturally denoising when deep, not when shallow.

Paper (Fig 3 caption): "Autoencoders trained on MNIST (A) and a 1D dataset on the plane (B, C)
with a ridge λ = 10−4 ... We see that for large depths (A, B) the learned autoencoder is naturally
denoising, projecting points to the data distribution, which is not the case for shallow networks (C)."
Measured: for noisy inputs, ratio = mean distance of the outputs to the clean data / mean distance
of the inputs (repcost.analysis.denoising). Target: deep ratio <= 0.5 and below the shallow one.
Two sweeps: presets jacot23-fig3-mnist (full: depths 2, 4, 6, 10) and jacot23-fig3-curve (full: 2, 6, 10, 14);
the verdicts compare the best deep net with the shallowest one. MNIST also gets a linear baseline (PCA-k
projections) and the Jacobian spectra that §5 says should be a projection.
"""

from __future__ import annotations

import time

import numpy as np
from matplotlib.figure import Figure

from repcost.analysis.denoising import add_noise, denoising, nearest_distance, pca_projection
from repcost.analysis.jacobians import jacobian_spectra
from repcost.analysis.spectra import numerical_rank
from repcost.data.curve_2d import curve_points, distance_to_curve
from repcost.figures import figure_args, is_full, load_run, run_figure, save_figure, sweep_for
from repcost.plots.jacot23 import (autoencoder_jacobian_axes, curve_denoising_axes, mnist_rows_axes,
                                   ratio_vs_depth_axes)

FIG = "jacot23-fig3"
MNIST_SIGMAS = (0.1, 0.2, 0.4)  # per-pixel noise std (pixels in [0, 1]); 0.2 is the headline
MNIST_SIGMA = 0.2
CURVE_SIGMA = 0.1  # noise std of the 2-D inputs around the curve (the curve lies in [-1, 1]²)
N_SHOW = 8
PCA_KS = (25, 50, 100, 200)  # rank-k linear projections: the best linear denoisers of each rank
RANK_TOL = 1e-2  # Jacobian rank: count s_i > RANK_TOL · s_1 (as jacot23-depth)
N_JAC = 20  # clean test images at which the MNIST autoencoders' Jacobians are taken (784 x 784 each)


def main():
    a = figure_args(__doc__).parse_args()
    t0 = time.time()
    mn = sweep_for(f"{FIG}-mnist", a, sort_by="model.depth")
    cu = sweep_for(f"{FIG}-curve", a, sort_by="model.depth")
    rows, res = [], {}
    fig = Figure(figsize=(max(14, 4.2 * len(cu)), 9), layout="constrained")
    gs = fig.add_gridspec(2, max(len(cu), 2), height_ratios=[1.0, 1.4])

    # ---- MNIST (A): clean test images + noise, distance to the clean image (and to the nearest training image)
    img_rows, img_labels, jac = None, [], {}
    for r in mn:
        model, data, summ, spec = load_run(r["path"])
        L = model.depth
        clean = data.y_test.numpy()
        recon = denoising(model, clean, clean)  # noise-free reconstruction error (d_in = 0)
        # §5: a rank-recovering autoencoder has Jf(x) = projection onto the tangent space (k ones, then zeros)
        s = jacobian_spectra(model, clean[:N_JAC])
        jac[f"L={L}"] = s.mean(axis=0)
        js = {"jac_rank": float(numerical_rank(s, RANK_TOL).mean()), "jac_n_above_half": float((s > 0.5).sum(1).mean()),
              "jac_s1": float(s[:, 0].mean()), "jac_fro2": float((s ** 2).sum(1).mean())}
        for sigma in MNIST_SIGMAS:
            noisy = add_noise(clean, sigma, seed=1)
            d = denoising(model, noisy, clean)
            near = denoising(model, noisy, distance=lambda p: nearest_distance(p, data.y_train.numpy()))
            rows.append({"panel": "A mnist", "depth": L, "sigma": sigma, **d.summary(),
                         "nearest_train_ratio": near.ratio, "clean_recon_err": float(recon.d_out.mean()),
                         **js, "train_loss": summ["train_loss"],
                         "param_sq_norm_per_depth": summ["param_sq_norm_per_depth"],
                         "steps": summ["steps"], "wall_time_s": summ["wall_time_s"]})
            if sigma == MNIST_SIGMA:
                res[("mnist", L)] = rows[-1]
                if img_rows is None:
                    img_rows, img_labels = [noisy[:N_SHOW]], [f"noisy σ={sigma}"]
                img_rows.append(d.outputs[:N_SHOW])
                img_labels.append(f"L={L} output")
    # linear baseline: the orthogonal projection onto the training images' top-k principal directions
    # (every MNIST run of the sweep shares one data config, so the last run's images stand for all)
    noisy_by_sigma = {sigma: add_noise(clean, sigma, seed=1) for sigma in MNIST_SIGMAS}  # the nets' inputs
    for k in PCA_KS:
        proj = pca_projection(data.y_train.numpy(), k)
        recon = float(denoising(proj, clean, clean).d_out.mean())
        for sigma, noisy in noisy_by_sigma.items():
            rows.append({"panel": "A mnist PCA", "pca_k": k, "sigma": sigma,
                         **denoising(proj, noisy, clean).summary(), "clean_recon_err": recon})
    top = gs[0, :].subgridspec(1, 3, width_ratios=[2.6, 1, 1], wspace=0.25)
    mnist_rows_axes(fig, top[0, 0], img_rows, img_labels)
    autoencoder_jacobian_axes(fig.add_subplot(top[0, 1]), jac,
                              f"MNIST: singular values of Jf(x),\nmean over {N_JAC} clean test images")
    ratio_vs_depth_axes(fig.add_subplot(top[0, 2]),
                        {f"σ={sg}": [(q["depth"], q["ratio"]) for q in rows if q["panel"] == "A mnist" and q["sigma"] == sg]
                         for sg in MNIST_SIGMAS},
                        {f"σ={sg}": min(q["ratio"] for q in rows if q["panel"] == "A mnist PCA" and q["sigma"] == sg)
                         for sg in MNIST_SIGMAS},
                        "MNIST: denoising ratio (dashed: best PCA-k)")

    # ---- curve_2d (B, C): noisy inputs around the curve, distance to the curve
    for j, r in enumerate(cu):
        model, data, summ, spec = load_run(r["path"])
        L, cfg = model.depth, spec.data
        dist = lambda p: distance_to_curve(cfg, p)  # noqa: E731
        noisy = add_noise(data.y_test.numpy(), CURVE_SIGMA, seed=1)
        d = denoising(model, noisy, distance=dist)
        uni = np.random.default_rng(2).uniform(-1.2, 1.2, size=(400, 2))
        du = denoising(model, uni, distance=dist)
        rows.append({"panel": "B/C curve", "depth": L, "sigma": CURVE_SIGMA, **d.summary(),
                     **du.summary("uniform_"), "train_loss": summ["train_loss"],
                     "param_sq_norm_per_depth": summ["param_sq_norm_per_depth"], "steps": summ["steps"],
                     "wall_time_s": summ["wall_time_s"]})
        res[("curve", L)] = rows[-1]
        ax = fig.add_subplot(gs[1, j])
        show = slice(0, 60)
        # as the paper's panels B, C: random inputs in the plane and where the autoencoder maps them
        curve_denoising_axes(ax, data.y_train.numpy(), curve_points(cfg, 400).numpy(), uni[show], du.outputs[show],
                             f"curve, L={L}: ratio {du.ratio:.2f} (random), {d.ratio:.2f} (σ={CURVE_SIGMA})")
        if j == 0:
            ax.legend(fontsize=7, loc="lower right")
    mode = {t: "full" if is_full(a, f"{FIG}-{t}") else "quick" for t in ("mnist", "curve")}
    fig.suptitle(f"MNIST ({mode['mnist']}) σ={MNIST_SIGMA} (top); "
                 f"curve ({mode['curve']}), random inputs in [-1.2, 1.2]² and their images (bottom)")
    save_figure(fig, FIG, rows, a)

    print(f"\n== {FIG} (MNIST {mode['mnist']}, curve {mode['curve']}), {time.time() - t0:.0f} s")
    print("paper: deep autoencoders are naturally denoising, shallow ones are not "
          "(target: deep ratio <= 0.5 and below the shallow ratio)")
    for task in ("mnist", "curve"):
        for L in sorted(L for t, L in res if t == task):
            q = res[(task, L)]
            extra = (f", to nearest training image {q['nearest_train_ratio']:.3f}, clean reconstruction error "
                     f"{q['clean_recon_err']:.3f}; Jacobian: {q['jac_n_above_half']:.0f} singular values > 0.5, s1 "
                     f"{q['jac_s1']:.2f}, rank (1e-2) {q['jac_rank']:.0f}" if task == "mnist" else
                     f", uniform inputs in [-1.2,1.2]² ratio {q['uniform_ratio']:.3f}")
            print(f"   {task} L={L}: ratio {q['ratio']:.3f} (mean input dist {q['d_in_mean']:.3f} -> output "
                  f"{q['d_out_mean']:.3f}; {100 * q['frac_closer']:.0f}% moved closer){extra}")
    for sigma in MNIST_SIGMAS:
        best = min((q for q in rows if q["panel"] == "A mnist PCA" and q["sigma"] == sigma), key=lambda q: q["ratio"])
        _verdict(f"mnist (σ={sigma} noise; best linear projection PCA-{best['pca_k']}: {best['ratio']:.3f})",
                 {q["depth"]: q["ratio"] for q in rows if q["panel"] == "A mnist" and q["sigma"] == sigma})
    curve = [q for q in rows if q["panel"] == "B/C curve"]
    _verdict(f"curve (σ={CURVE_SIGMA} noise)", {q["depth"]: q["ratio"] for q in curve})
    _verdict("curve (random inputs, the paper's panels B, C)", {q["depth"]: q["uniform_ratio"] for q in curve})


def _verdict(what: str, ratios: dict) -> None:
    """Print the best deep net's ratio against the shallowest net's and whether the target is met."""
    Ls = sorted(ratios)
    if len(Ls) < 2:
        print(f"   {what}: one depth only ({Ls}), nothing to compare")
        return
    deep = min(Ls[1:], key=ratios.get)
    ok = ratios[deep] <= 0.5 and ratios[deep] < ratios[Ls[0]]
    print(f"   {what}: best deep L={deep} {ratios[deep]:.3f} vs shallow L={Ls[0]} {ratios[Ls[0]]:.3f} -> "
          f"{'REPRODUCED' if ok else 'NOT reproduced'}")


if __name__ == "__main__":
    run_figure(main)
