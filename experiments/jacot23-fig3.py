"""Jacot 2023 Fig 3: autoencoders with λ = 1e-4 are naturally denoising when deep, not when shallow.

Paper (Fig 3 caption): "Autoencoders trained on MNIST (A) and a 1D dataset on the plane (B, C)
with a ridge λ = 10−4 ... We see that for large depths (A, B) the learned autoencoder is naturally
denoising, projecting points to the data distribution, which is not the case for shallow networks (C)."
Measured: for noisy inputs, ratio = mean distance of the outputs to the clean data / mean distance
of the inputs (repcost.analysis.denoising). Target: deep ratio <= 0.5 and below the shallow one.
Two sweeps: presets jacot23-fig3-mnist and jacot23-fig3-curve (each depth 2 vs 6).
"""

from __future__ import annotations

import time

import numpy as np
from matplotlib.figure import Figure

from repcost.analysis.denoising import add_noise, denoising, nearest_distance
from repcost.data.curve_2d import curve_points, distance_to_curve
from repcost.figures import figure_args, is_full, load_run, run_figure, save_figure, sweep_for
from repcost.plots.jacot23 import curve_denoising_axes, mnist_rows_axes

FIG = "jacot23-fig3"
MNIST_SIGMAS = (0.1, 0.2, 0.4)  # per-pixel noise std (pixels in [0, 1]); 0.2 is the headline
MNIST_SIGMA = 0.2
CURVE_SIGMA = 0.1  # noise std of the 2-D inputs around the curve (the curve lies in [-1, 1]²)
N_SHOW = 8


def main():
    a = figure_args(__doc__).parse_args()
    t0 = time.time()
    mn = sweep_for(f"{FIG}-mnist", a, sort_by="model.depth")
    cu = sweep_for(f"{FIG}-curve", a, sort_by="model.depth")
    rows, res = [], {}
    fig = Figure(figsize=(max(14, 4.2 * len(cu)), 9), layout="constrained")
    gs = fig.add_gridspec(2, max(len(cu), 2), height_ratios=[1.0, 1.4])

    # ---- MNIST (A): clean test images + noise, distance to the clean image (and to the nearest training image)
    img_rows, img_labels = None, []
    for r in mn:
        model, data, summ, spec = load_run(r["path"])
        L = model.depth
        clean = data.y_test.numpy()
        recon = denoising(model, clean, clean)  # noise-free reconstruction error (d_in = 0)
        for sigma in MNIST_SIGMAS:
            noisy = add_noise(clean, sigma, seed=1)
            d = denoising(model, noisy, clean)
            near = denoising(model, noisy, distance=lambda p: nearest_distance(p, data.y_train.numpy()))
            rows.append({"panel": "A mnist", "depth": L, "sigma": sigma, **d.summary(),
                         "nearest_train_ratio": near.ratio, "clean_recon_err": float(recon.d_out.mean()),
                         "train_loss": summ["train_loss"], "param_sq_norm_per_depth": summ["param_sq_norm_per_depth"],
                         "steps": summ["steps"], "wall_time_s": summ["wall_time_s"]})
            if sigma == MNIST_SIGMA:
                res[("mnist", L)] = rows[-1]
                if img_rows is None:
                    img_rows, img_labels = [noisy[:N_SHOW]], [f"noisy σ={sigma}"]
                img_rows.append(d.outputs[:N_SHOW])
                img_labels.append(f"L={L} output")
    mnist_rows_axes(fig, gs[0, :], img_rows, img_labels)

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
    save_figure(fig, FIG, rows, a.out)

    print(f"\n== {FIG} (MNIST {mode['mnist']}, curve {mode['curve']}), {time.time() - t0:.0f} s")
    print("paper: deep autoencoders are naturally denoising, shallow ones are not "
          "(target: deep ratio <= 0.5 and below the shallow ratio)")
    for task in ("mnist", "curve"):
        Ls = sorted(L for t, L in res if t == task)
        for L in Ls:
            q = res[(task, L)]
            extra = (f", to nearest training image {q['nearest_train_ratio']:.3f}, clean reconstruction error "
                     f"{q['clean_recon_err']:.3f}" if task == "mnist" else
                     f", uniform inputs in [-1.2,1.2]² ratio {q['uniform_ratio']:.3f}")
            print(f"   {task} L={L}: ratio {q['ratio']:.3f} (mean input dist {q['d_in_mean']:.3f} -> output "
                  f"{q['d_out_mean']:.3f}; {100 * q['frac_closer']:.0f}% moved closer){extra}")
        kinds = [("", f"σ={MNIST_SIGMA if task == 'mnist' else CURVE_SIGMA} noise")]
        if task == "curve":
            kinds.append(("uniform_", "random inputs, the paper's panels B, C"))
        for key, what in kinds:
            deep, shallow = res[(task, Ls[-1])][key + "ratio"], res[(task, Ls[0])][key + "ratio"]
            ok = deep <= 0.5 and deep < shallow
            print(f"   {task} ({what}): deep {deep:.3f} vs shallow {shallow:.3f} -> "
                  f"{'REPRODUCED' if ok else 'NOT reproduced'}")


if __name__ == "__main__":
    run_figure(main)
