"""Jacot 2023 Fig 3: autoencoders with λ = 1e-4 are naturally denoising when deep, not when shallow.

Paper (Fig 3 caption): "Autoencoders trained on MNIST (A) and a 1D dataset on the plane (B, C)
with a ridge λ = 10−4 ... We see that for large depths (A, B) the learned autoencoder is naturally
denoising, projecting points to the data distribution, which is not the case for shallow networks (C)."
Measured: for noisy inputs, ratio = mean distance of the outputs to the clean data / mean distance
of the inputs (repcost.analysis.denoising). Target: deep ratio <= 0.5 and below the shallow one.
Two sweeps: presets jacot23-fig3-mnist (full: depths 2, 4, 6, 10) and jacot23-fig3-curve (full: 2, 6, 10, 14);
the verdicts compare the best deep net with the shallowest one. MNIST also gets a linear baseline (PCA-k
projections) and the Jacobian spectra that §5 says should be a projection. The full MNIST preset trains all
60,000 training images (`make data-mnist`) with seeds 0, 1, 2, the full curve preset seed 0, the quick ones
seeds 0, 1, 2: each seed is judged by the same rule, a panel's verdict is its pass rate (reproduced when most
seeds are), and the plot shows the first seed.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..analysis.denoising import add_noise, denoising, nearest_distance, pca_projection
from ..analysis.spectra import jacobian_spectra, numerical_rank
from ..data.curve_2d import curve_points, distance_to_curve
from . import Verdict, load_runs, most_seeds

FIG_ID = "jacot23-fig3"
MNIST_SIGMAS = (0.1, 0.2, 0.4)  # per-pixel noise std (pixels in [0, 1]); 0.2 is the headline
MNIST_SIGMA = 0.2
CURVE_SIGMA = 0.1  # noise std of the 2-D inputs around the curve (the curve lies in [-1, 1]²)
N_SHOW = 8
PCA_KS = (25, 50, 100, 200)  # rank-k linear projections: the best linear denoisers of each rank
RANK_TOL = 1e-2  # Jacobian rank: count s_i > RANK_TOL · s_1 (as jacot23-depth)
N_JAC = 20  # clean test images at which the MNIST autoencoders' Jacobians are taken (784 x 784 each)
N_NEAREST = 1000  # noisy test images whose outputs are compared with every training image (nearest_train_ratio)
CLAIM = ("Paper: deep autoencoders are naturally denoising, shallow ones are not (target: deep ratio <= 0.5 and "
         "below the shallow ratio).")


def inputs(args):
    """The MNIST and curve sweeps' runs, by seed and depth."""
    return [sorted(load_runs(f"{FIG_ID}-{t}", args), key=lambda r: (r.spec.seed, r.model.depth)) for t in ("mnist", "curve")]


def compute(inp) -> list[dict]:
    """Rows per (net, σ), the PCA baselines and the curve nets; the first row carries the plot's arrays (`_plot`)."""
    mnist, curve = inp
    rows, plot = [], {"jac": {}, "images": {}, "curves": []}
    for run in mnist:
        model, data = run.model, run.data
        L, clean = model.depth, data.y_test.numpy()
        recon = denoising(model, clean, clean)[0]  # noise-free reconstruction error (d_in = 0)
        s = jacobian_spectra(model, clean[:N_JAC])  # §5: Jf(x) should be the projection onto the tangent space
        if run.spec.seed == mnist[0].spec.seed:
            plot["jac"][f"L={L}"] = s.mean(axis=0)
        js = {"jac_rank": float(numerical_rank(s, RANK_TOL).mean()), "jac_n_above_half": float((s > 0.5).sum(1).mean()),
              "jac_s1": float(s[:, 0].mean()), "jac_fro2": float((s ** 2).sum(1).mean())}
        for sigma in MNIST_SIGMAS:
            noisy = add_noise(clean, sigma, seed=1)
            d, outputs = denoising(model, noisy, clean)
            near, _ = denoising(model, noisy[:N_NEAREST], distance=lambda p: nearest_distance(p, data.y_train.numpy()))
            rows.append({"panel": "A mnist", "seed": run.spec.seed, "depth": L, "sigma": sigma, **d,
                         "nearest_train_ratio": near["ratio"], "clean_recon_err": recon["d_out_mean"], **js,
                         **run.columns("param_sq_norm_per_depth")})
            if sigma == MNIST_SIGMA and run.spec.seed == mnist[0].spec.seed:  # a row of images each: label -> images
                plot["images"].setdefault(f"noisy σ={sigma}", noisy[:N_SHOW])
                plot["images"][f"L={L} output"] = outputs[:N_SHOW]
    # linear baseline: the projection onto the training images' top-k principal directions (one data config)
    noisy_by_sigma = {sigma: add_noise(clean, sigma, seed=1) for sigma in MNIST_SIGMAS}
    for k in (k for k in PCA_KS if k <= min(data.y_train.shape)):  # a rank-k projection needs k ≤ min(N, d)
        proj = pca_projection(data.y_train.numpy(), k)
        recon = denoising(proj, clean, clean)[0]["d_out_mean"]
        for sigma, noisy in noisy_by_sigma.items():
            rows.append({"panel": "A mnist PCA", "pca_k": k, "sigma": sigma, **denoising(proj, noisy, clean)[0],
                         "clean_recon_err": recon})
    for run in curve:
        model, data, cfg = run.model, run.data, run.spec.data
        L = model.depth
        dist = lambda p, cfg=cfg: distance_to_curve(cfg, p)  # noqa: E731
        d = denoising(model, add_noise(data.y_test.numpy(), CURVE_SIGMA, seed=1), distance=dist)[0]
        uni = np.random.default_rng(2).uniform(-1.2, 1.2, size=(400, 2))
        du, uni_out = denoising(model, uni, distance=dist)
        rows.append({"panel": "B/C curve", "seed": run.spec.seed, "depth": L, "sigma": CURVE_SIGMA, **d,
                     **{f"uniform_{k}": v for k, v in du.items()}, **run.columns("param_sq_norm_per_depth")})
        if run.spec.seed != curve[0].spec.seed:
            continue
        # as the paper's panels B, C: random inputs in the plane and where the autoencoder maps them
        plot["curves"].append((data.y_train.numpy(), curve_points(cfg, 400).numpy(), uni[:60], uni_out[:60],
                               f"curve, L={L}: ratio {du['ratio']:.2f} (random), {d['ratio']:.2f} (σ={CURVE_SIGMA})"))
    rows[0]["_plot"] = plot
    return rows


def plot(rows: list[dict]):
    """A: MNIST images, Jacobian spectra, ratio against depth; B/C: the curve autoencoders on random inputs."""
    p = rows[0]["_plot"]
    fig = Figure(figsize=(max(14, 4.2 * len(p["curves"])), 9), layout="constrained")
    gs = fig.add_gridspec(2, max(len(p["curves"]), 2), height_ratios=[1.0, 1.4])
    top = gs[0, :].subgridspec(1, 3, width_ratios=[2.6, 1, 1], wspace=0.25)
    cells = top[0, 0].subgridspec(len(p["images"]), N_SHOW, wspace=0.02, hspace=0.05)
    for i, (label, imgs) in enumerate(p["images"].items()):
        for j, img in enumerate(imgs):
            ax = fig.add_subplot(cells[i, j])
            ax.imshow(np.clip(img.reshape(28, 28), 0, 1), cmap="gray_r", vmin=0, vmax=1)
            ax.set_xticks([]), ax.set_yticks([])
            if j == 0:
                ax.set_ylabel(label, fontsize=7, rotation=0, ha="right", va="center")
    # §5: the Jacobian of a projection onto the data's k-dim tangent space is k ones, then zeros
    ax = fig.add_subplot(top[0, 1])
    for j, (label, s) in enumerate(p["jac"].items()):
        ax.semilogy(np.arange(1, len(s) + 1), np.maximum(s, 1e-6), "-", color=f"C{j}", label=label)
    ax.axhline(1.0, color="grey", ls=":", lw=1)
    shown = max((int(np.sum(s > 1e-3 * np.max(s))) for s in p["jac"].values()), default=1)
    ax.set(xlabel="i", ylim=(1e-3, None), xlim=(0, 1.15 * shown + 1))
    ax.set_title(f"MNIST: singular values of Jf(x),\nmean over {N_JAC} clean test images", fontsize=9)
    ax.legend(fontsize=7)
    ax = fig.add_subplot(top[0, 2])  # the ratio against depth, dashed: the best PCA-k, dotted: the 0.5 target
    for j, sg in enumerate(MNIST_SIGMAS):
        pts = sorted((q["depth"], q["ratio"]) for q in rows
                     if q["panel"] == "A mnist" and q["sigma"] == sg and q["seed"] == rows[0]["seed"])
        ax.plot([d for d, _ in pts], [r for _, r in pts], "o-", color=f"C{j}", label=f"σ={sg}")
        ax.axhline(min(q["ratio"] for q in rows if q["panel"] == "A mnist PCA" and q["sigma"] == sg),
                   color=f"C{j}", ls="--", lw=1)
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    ax.set(xlabel="depth L", ylabel="ratio (output / input distance)")
    ax.set_title("MNIST: denoising ratio (dashed: best PCA-k)", fontsize=9)
    ax.legend(fontsize=7)
    for j, (train_y, pts, uni, out, title) in enumerate(p["curves"]):
        # the training data (blue) on the curve, random inputs (green) with arrows to their images (orange)
        ax = fig.add_subplot(gs[1, j])
        ax.plot(pts[:, 0], pts[:, 1], "-", color="lightgrey", lw=1)
        ax.scatter(train_y[:, 0], train_y[:, 1], s=8, color="C0", label="training data")
        ax.quiver(uni[:, 0], uni[:, 1], out[:, 0] - uni[:, 0], out[:, 1] - uni[:, 1], angles="xy", scale_units="xy",
                  scale=1, width=0.003, color="grey", alpha=0.7)
        ax.scatter(uni[:, 0], uni[:, 1], s=8, color="C2", label="inputs")
        ax.scatter(out[:, 0], out[:, 1], s=8, color="C1", label="outputs")
        ax.set_aspect("equal")
        ax.set_title(title, fontsize=9)
        if j == 0:
            ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"MNIST σ={MNIST_SIGMA} (top); curve, random inputs in [-1.2, 1.2]² and their images (bottom)")
    return fig


def _compare(what: str, ratios: dict) -> tuple[bool, str]:
    """The best deep net's ratio against the shallowest net's: (target met, one line)."""
    Ls = sorted(ratios)
    if len(Ls) < 2:
        return False, f"  {what}: one depth only ({Ls}), nothing to compare"
    deep = min(Ls[1:], key=ratios.get)
    ok = ratios[deep] <= 0.5 and ratios[deep] < ratios[Ls[0]]
    return ok, (f"  {what}: best deep L={deep} {ratios[deep]:.3f} vs shallow L={Ls[0]} {ratios[Ls[0]]:.3f} -> "
                f"{'reproduced' if ok else 'NOT reproduced'}")


def _judge(rows: list[dict]) -> tuple[bool, list[str]]:
    """One seed's nets of one panel (and the PCA baselines): MNIST compared at each σ, the curve with noise and with
    random inputs; reproduced when every comparison meets the target."""
    nets = [q for q in rows if q["panel"] != "A mnist PCA"]
    if nets[0]["panel"] == "B/C curve":
        checks = [_compare(f"curve (σ={CURVE_SIGMA} noise)", {q["depth"]: q["ratio"] for q in nets}),
                  _compare("curve (random inputs, the paper's panels B, C)", {q["depth"]: q["uniform_ratio"] for q in nets})]
    else:
        checks = []
        for sigma in MNIST_SIGMAS:
            pca = [q for q in rows if q["panel"] == "A mnist PCA" and q["sigma"] == sigma]
            best = f"; best PCA-{min(pca, key=lambda q: q['ratio'])['pca_k']}: {min(q['ratio'] for q in pca):.3f}" if pca else ""
            checks.append(_compare(f"mnist (σ={sigma} noise{best})", {q["depth"]: q["ratio"] for q in nets if q["sigma"] == sigma}))
    return all(ok for ok, _ in checks), [line for _, line in checks]


def verdict(rows: list[dict], full: bool) -> Verdict:
    """MNIST and the curve, each over its own seeds (the full MNIST preset trains three, the full curve one, the
    quick presets three each): a seed reproduces a panel when every comparison of that panel meets the target,
    a panel is reproduced when most of its seeds are, the figure when both panels are. The PCA baselines
    depend on the data only and serve every seed."""
    pca = [q for q in rows if q["panel"] == "A mnist PCA"]
    parts = [most_seeds([q for q in rows if q["panel"] == panel], _judge, f"{name} reproduced", common=pca)
             for panel, name in (("A mnist", "MNIST"), ("B/C curve", "curve"))]
    return Verdict(all(v.passed for v in parts), "\n".join(v.text for v in parts))
