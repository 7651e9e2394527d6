"""Denoising distances (Jacot 2023 Fig 3) on hand-built autoencoders with known answers."""

import numpy as np
import torch

from repcost.analysis.denoising import add_noise, denoising, nearest_distance, paired_distance
from repcost.data.curve_2d import Curve2DConfig, curve_points, distance_to_curve


def linear(P):
    lin = torch.nn.Linear(P.shape[1], P.shape[0], bias=False).double()
    lin.weight.data = torch.as_tensor(P, dtype=torch.float64)
    return lin


def test_identity_does_not_denoise_and_projection_does():
    d, k = 20, 2
    rng = np.random.default_rng(0)
    U = np.linalg.qr(rng.standard_normal((d, k)))[0]
    clean = rng.standard_normal((500, k)) @ U.T  # data on a k-dim subspace
    noisy = add_noise(clean, 0.1, seed=1)
    ident = denoising(linear(np.eye(d)), noisy, clean)
    assert np.isclose(ident.ratio, 1.0) and ident.frac_closer == 0.0
    proj = denoising(linear(U @ U.T), noisy, clean)  # orthogonal projection onto the data's subspace
    # the output keeps only the in-subspace noise: ratio ≈ sqrt(k/d)
    assert abs(proj.ratio - np.sqrt(k / d)) < 0.05 and proj.frac_closer == 1.0


def test_projection_onto_a_circle_with_curve_distance():
    cfg = Curve2DConfig(shape="circle")
    clean = curve_points(cfg, 200).numpy()
    noisy = add_noise(clean, 0.05, seed=0)

    class Normalise(torch.nn.Module):
        def forward(self, x):
            return x / x.norm(dim=1, keepdim=True)

    r = denoising(Normalise(), noisy, distance=lambda p: distance_to_curve(cfg, p))
    assert r.d_in.mean() > 0.02 and r.ratio < 1e-5  # radial projection lands on the unit circle


def test_nearest_and_paired_distances():
    rng = np.random.default_rng(0)
    p, data = rng.standard_normal((30, 5)), rng.standard_normal((70, 5))
    brute = np.linalg.norm(p[:, None] - data[None], axis=2).min(1)
    assert np.allclose(nearest_distance(p, data, chunk=7), brute)
    assert np.allclose(paired_distance(p, p + 3.0), 3.0 * np.sqrt(5))
    a = add_noise(p, 0.5, seed=3)
    assert np.array_equal(a, add_noise(p, 0.5, seed=3)) and not np.allclose(a, p)
