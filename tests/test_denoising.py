"""Denoising distances (Jacot 2023 Fig 3) on hand-built autoencoders with known answers."""

import numpy as np
import pytest
import torch

from repcost.analysis.denoising import add_noise, denoising, nearest_distance
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
    ident, _ = denoising(linear(np.eye(d)), noisy, clean)
    assert np.isclose(ident["ratio"], 1.0) and ident["frac_closer"] == 0.0
    proj, _ = denoising(linear(U @ U.T), noisy, clean)  # orthogonal projection onto the data's subspace
    # the output keeps only the in-subspace noise: ratio ≈ sqrt(k/d)
    assert abs(proj["ratio"] - np.sqrt(k / d)) < 0.05 and proj["frac_closer"] == 1.0


def test_projection_onto_a_circle_with_curve_distance():
    cfg = Curve2DConfig(shape="circle")
    clean = curve_points(cfg, 200).numpy()
    noisy = add_noise(clean, 0.05, seed=0)

    class Normalise(torch.nn.Module):
        def forward(self, x):
            return x / x.norm(dim=1, keepdim=True)

    r, _ = denoising(Normalise(), noisy, distance=lambda p: distance_to_curve(cfg, p))
    assert r["d_in_mean"] > 0.02 and r["ratio"] < 1e-5  # radial projection lands on the unit circle


def test_nearest_and_paired_distances():
    rng = np.random.default_rng(0)
    p, data = rng.standard_normal((30, 5)), rng.standard_normal((70, 5))
    brute = np.linalg.norm(p[:, None] - data[None], axis=2).min(1)
    assert np.allclose(nearest_distance(p, data, chunk=7), brute)
    assert np.allclose(denoising(lambda z: z + 3.0, p, p)[0]["d_out_mean"], 3.0 * np.sqrt(5))
    a = add_noise(p, 0.5, seed=3)
    assert np.array_equal(a, add_noise(p, 0.5, seed=3)) and not np.allclose(a, p)


def test_projection_autoencoder_jacobian_is_k_ones():
    """Jacot 2023 §5: an autoencoder that projects onto the data's k-dim tangent space has Jf = k ones, then zeros."""
    from repcost.analysis.spectra import jacobian_spectra

    d, k = 12, 3
    U = np.linalg.qr(np.random.default_rng(0).standard_normal((d, k)))[0]
    s = jacobian_spectra(linear(U @ U.T), np.random.default_rng(1).standard_normal((4, d)), chunk_size=4)
    assert s.shape == (4, d)
    assert np.allclose(s[:, :k], 1.0) and np.allclose(s[:, k:], 0.0, atol=1e-12)


def test_pca_projection_recovers_affine_data_and_keeps_k_of_d_noise_dims():
    """PCA-k on data spanning a k-dim affine subspace: clean points are fixed, noise keeps ratio ≈ sqrt(k/d)."""
    from repcost.analysis.denoising import pca_projection

    d, k = 30, 4
    rng = np.random.default_rng(0)
    U = np.linalg.qr(rng.standard_normal((d, k)))[0]
    clean = rng.standard_normal((400, k)) @ U.T + 3.0  # affine: offset off the origin
    proj = pca_projection(clean, k)
    assert denoising(proj, clean, clean)[0]["d_out_mean"] < 1e-10  # every distance is ≥ 0
    noisy = add_noise(clean, 0.1, seed=1)
    assert abs(denoising(proj, noisy, clean)[0]["ratio"] - np.sqrt(k / d)) < 0.04
    full, _ = denoising(pca_projection(clean, d), noisy, clean)  # all directions: the identity
    assert np.isclose(full["ratio"], 1.0)
    with pytest.raises(ValueError, match=r"k must be in 1..min\(n, d\) = 30 .*got k=31"):
        pca_projection(clean, 31)
