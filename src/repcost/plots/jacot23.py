"""Figure builders for Jacot 2023 (Figs 1–3 and rank vs depth): arrays in, matplotlib Figure out."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure


def spectra_figure(hidden: Sequence[np.ndarray], weights: Sequence[np.ndarray], jac: np.ndarray,
                   k: int | None = None, n_show: int = 10, title: str = "") -> Figure:
    """Fig 1: (A) first n_show normalised singular values s_i/s_1 of each hidden layer's centred
    representation, (B) singular values of each weight matrix, (C) first n_show singular values of
    the Jacobian at a few points. hidden[ℓ−1], weights[ℓ−1] are spectra of layer ℓ; jac (P, r)."""
    fig = Figure(figsize=(14, 4))
    axA, axB, axC = fig.subplots(1, 3)
    i = np.arange(1, n_show + 1)
    for ell, (s, c) in enumerate(zip(hidden, colormaps["viridis"](np.linspace(0, 1, len(hidden)))), start=1):
        s = np.asarray(s)[:n_show]
        axA.semilogy(i[: len(s)], s / s[0], "o-", color=c, ms=3, label=f"ℓ={ell}")
    axA.set(title="A: hidden representations (centred), $s_i/s_1$", xlabel="i", ylim=(1e-4, 1.5))
    axA.legend(fontsize=6, ncol=2)
    for ell, (s, c) in enumerate(zip(weights, colormaps["viridis"](np.linspace(0, 1, len(weights)))), start=1):
        axB.semilogy(np.arange(1, len(s) + 1), s, "-", color=c, label=f"$W_{{{ell}}}$")
    axB.set(title="B: weight matrices, $s_i$", xlabel="i")
    axB.legend(fontsize=6, ncol=2)
    for p, s in enumerate(np.asarray(jac)):  # one colour per input point
        axC.semilogy(i[: min(n_show, len(s))], s[:n_show], "o-", ms=3, alpha=0.7,
                     label="one line per point $x_p$" if p == 0 else None)
    axC.set(title="C: Jacobian $Jf(x_p)$ at the analysis points, $s_i$", xlabel="i")
    if k:
        for ax in (axA, axC):
            ax.axvline(k + 0.5, color="grey", ls=":", lw=1, label=f"true rank k = {k} (dotted)")
    axC.legend(fontsize=6)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def decision_figure(panels: Sequence[dict], ncols: int = 2) -> Figure:
    """Fig 2: decision regions. Each panel: {labels (ny, nx), extent, x (N, 2), y (N,), n_classes,
    tripoints (T, 2), title}."""
    from matplotlib.colors import ListedColormap

    n = len(panels)
    nrows = int(np.ceil(n / ncols))
    fig = Figure(figsize=(5 * ncols, 3.2 * nrows))
    axes = np.atleast_1d(fig.subplots(nrows, ncols)).ravel()
    for ax, p in zip(axes, panels):
        k = p["n_classes"]
        cmap = ListedColormap([f"C{c}" for c in range(k)])
        ax.imshow(p["labels"], origin="lower", extent=p["extent"], cmap=cmap, vmin=-0.5, vmax=k - 0.5,
                  alpha=0.35, aspect="auto", interpolation="nearest")
        ax.scatter(p["x"][:, 0], p["x"][:, 1], c=p["y"], cmap=cmap, vmin=-0.5, vmax=k - 0.5, s=6)
        tp = np.asarray(p["tripoints"]).reshape(-1, 2)
        if len(tp):
            ax.plot(tp[:, 0], tp[:, 1], "k*", ms=12, mfc="yellow", label=f"{len(tp)} tripoint(s)")
            ax.legend(loc="lower left", fontsize=7)
        ax.set_title(p["title"], fontsize=9)
        ax.set_xticks([]), ax.set_yticks([])
    for ax in axes[n:]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def curve_denoising_axes(ax, data: np.ndarray, curve: np.ndarray, inputs: np.ndarray, outputs: np.ndarray,
                         title: str = ""):
    """Fig 3B–C on one axes: training data (blue), the curve, inputs (green) with arrows to outputs (orange)."""
    ax.plot(curve[:, 0], curve[:, 1], "-", color="lightgrey", lw=1)
    ax.scatter(data[:, 0], data[:, 1], s=8, color="C0", label="training data")
    ax.quiver(inputs[:, 0], inputs[:, 1], outputs[:, 0] - inputs[:, 0], outputs[:, 1] - inputs[:, 1],
              angles="xy", scale_units="xy", scale=1, width=0.003, color="grey", alpha=0.7)
    ax.scatter(inputs[:, 0], inputs[:, 1], s=8, color="C2", label="inputs")
    ax.scatter(outputs[:, 0], outputs[:, 1], s=8, color="C1", label="outputs")
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=9)


def autoencoder_jacobian_axes(ax, spectra: dict, title: str = ""):
    """Singular values s_i of an autoencoder's Jacobian Jf(x), averaged over clean data points, one line per
    label: a rank-k projection onto the data's tangent space (Jacot 2023 §5) is k ones, then zeros."""
    for j, (label, s) in enumerate(spectra.items()):
        s = np.asarray(s)
        ax.semilogy(np.arange(1, len(s) + 1), np.maximum(s, 1e-6), "-", color=f"C{j}", label=label)
    ax.axhline(1.0, color="grey", ls=":", lw=1)
    top = max((int(np.sum(np.asarray(s) > 1e-3 * np.max(s))) for s in spectra.values()), default=1)
    ax.set(xlabel="i", ylim=(1e-3, None), xlim=(0, 1.15 * top + 1))
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)


def ratio_vs_depth_axes(ax, curves: dict, baselines: dict | None = None, title: str = ""):
    """Denoising ratio against depth, one line per label (curves[label] = [(depth, ratio), ...]), each label's
    baseline (e.g. the best linear projection) as a dashed line in its colour, and the 0.5 target dotted."""
    for j, (label, pts) in enumerate(curves.items()):
        pts = sorted(pts)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=f"C{j}", label=label)
        if baselines and label in baselines:
            ax.axhline(baselines[label], color=f"C{j}", ls="--", lw=1)
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    ax.set(xlabel="depth L", ylabel="ratio (output / input distance)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)


def mnist_rows_axes(fig: Figure, gridspec, rows: Sequence[np.ndarray], labels: Sequence[str], shape=(28, 28)):
    """Fig 3A inside a gridspec cell: one row of images per array in rows (each (n, 784))."""
    n = len(rows[0])
    sub = gridspec.subgridspec(len(rows), n, wspace=0.02, hspace=0.05)
    for r, (imgs, lab) in enumerate(zip(rows, labels)):
        for j in range(n):
            ax = fig.add_subplot(sub[r, j])
            ax.imshow(np.clip(imgs[j].reshape(shape), 0, 1), cmap="gray_r", vmin=0, vmax=1)
            ax.set_xticks([]), ax.set_yticks([])
            if j == 0:
                ax.set_ylabel(lab, fontsize=7, rotation=0, ha="right", va="center")


def depth_figure(table: Sequence[dict], k: int) -> Figure:
    """Rank vs depth: ‖θ‖²/L, the bottleneck layer's rank and the Jacobian rank per depth (one line
    per N), with the KRR baseline's Jacobian rank as a horizontal line. Rows: {depth, N,
    norm_per_depth, bottleneck_rank, jacobian_rank, krr_jacobian_rank}."""
    fig = Figure(figsize=(12, 4))
    ax1, ax2 = fig.subplots(1, 2)
    Ns = sorted({r["N"] for r in table})
    for j, N in enumerate(Ns):
        rows = sorted([r for r in table if r["N"] == N], key=lambda r: r["depth"])
        d = [r["depth"] for r in rows]
        ax1.plot(d, [r["norm_per_depth"] for r in rows], "o-", color=f"C{j}", label=f"N={N}")
        ax2.plot(d, [r["bottleneck_rank"] for r in rows], "o-", color=f"C{j}", label=f"bottleneck layer, N={N}")
        ax2.plot(d, [r["jacobian_rank"] for r in rows], "s--", color=f"C{j}", label=f"Jacobian (max), N={N}")
        ax2.axhline(rows[0]["krr_jacobian_rank"], color=f"C{j}", ls=":", label=f"KRR Jacobian, N={N}")
    ax1.axhline(k, color="grey", ls=":", label=f"true rank k={k}")
    ax1.set(xlabel="depth L", ylabel="‖θ‖²/L", title="rescaled parameter norm", yscale="log")
    ax1.legend(fontsize=7)
    ax2.axhline(k, color="grey", ls="-", lw=0.8)
    ax2.set(xlabel="depth L", ylabel="rank", title="rank recovery vs depth", yscale="log")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    return fig
