"""Denoising by autoencoders: how far outputs lie from the clean data vs how far inputs do (Jacot 2023 §5, Fig 3).

Jacot 2023 (§5, "Autoencoders") argues that an autoencoder of Bottleneck rank k trained on
k-dimensional data has, at data points, a Jacobian that is a projection onto the data's tangent
space, so it is naturally (locally) denoising: a noisy input x̃ = x + ε is mapped closer to the
data than x̃ itself. We measure, for each noisy input, its distance to the clean data d_in and the
distance d_out of the autoencoder's output to the clean data, with "the clean data" being

* the clean point the noise was added to (the default, MNIST Fig 3A),
* the nearest of a set of clean points (`nearest_distance`), or
* any distance function, e.g. `repcost.data.curve_2d.distance_to_curve` (Fig 3B–C).

ratio = mean(d_out) / mean(d_in): 1 = no denoising (e.g. the identity), 0 = perfect projection.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch

from .arrays import apply_model, as_f64, sq_distances


def add_noise(clean, sigma: float, seed: int = 0) -> np.ndarray:
    """clean + N(0, sigma²) per coordinate (float64 numpy, deterministic given seed)."""
    c = as_f64(clean)
    return c + sigma * np.random.default_rng(seed).standard_normal(c.shape)


def nearest_distance(points, data, chunk: int = 1024) -> np.ndarray:
    """min_j ‖points_i − data_j‖ (N,): distance to the nearest clean data point."""
    p, d = as_f64(points), as_f64(data)
    return np.concatenate([np.zeros(0)] + [np.sqrt(sq_distances(p[i:i + chunk], d).min(1))
                                           for i in range(0, len(p), chunk)])


def pca_projection(data, k: int) -> Callable:
    """x ↦ μ + V_k V_kᵀ (x − μ), the projection onto the affine span of data's top-k principal directions: the
    best rank-k linear autoencoder of data, whose Jacobian is k ones (a linear baseline for Jacot 2023 §5)."""
    X = as_f64(data)
    if X.ndim != 2 or not 1 <= int(k) <= min(X.shape):
        raise ValueError(f"pca_projection: k must be in 1..min(n, d) = {min(X.shape) if X.ndim == 2 else '?'} "
                         f"for data of shape {X.shape}, got k={k}")
    mu = X.mean(axis=0)
    V = np.linalg.svd(X - mu, full_matrices=False)[2][: int(k)].T
    mu_t, V_t = torch.as_tensor(mu), torch.as_tensor(V)
    return lambda x: (x.to(torch.float64) - mu_t) @ V_t @ V_t.T + mu_t


def denoising(model: Callable, noisy, clean=None, distance: Optional[Callable] = None) -> tuple[dict, np.ndarray]:
    """Apply model to noisy inputs; (summary, outputs). The summary: the mean distances of the inputs and of the
    outputs to the clean data, their `ratio` (module docstring), the median over inputs of d_out / d_in (inputs
    with d_in = 0 left out) and the fraction of inputs whose output is closer to the data than the input.

    distance(points) -> (N,) distances to the data; default: ‖points_i − clean_i‖, to the clean point each noisy
    input came from (needs `clean`).
    """
    if distance is None:
        if clean is None:
            raise ValueError("denoising: give the clean points or a distance function")
        c = as_f64(clean)
        distance = lambda p: np.linalg.norm(as_f64(p) - c, axis=1)  # noqa: E731
    noisy = as_f64(noisy)
    out = apply_model(model, noisy)
    d_in, d_out = as_f64(distance(noisy)), as_f64(distance(out))
    m, ok = float(np.mean(d_in)), d_in > 0
    return {"d_in_mean": m, "d_out_mean": float(np.mean(d_out)),
            "ratio": float(np.mean(d_out)) / m if m > 0 else float("nan"),
            "median_ratio": float(np.median(d_out[ok] / d_in[ok])) if ok.any() else float("nan"),
            "frac_closer": float(np.mean(d_out < d_in))}, out
