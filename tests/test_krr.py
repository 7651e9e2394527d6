"""Kernel ridge regression baseline and its Jacobian rank (Jacot 2023 App. D)."""

import numpy as np

from repcost.analysis.krr import fit_krr
from repcost.analysis.spectra import numerical_rank, singular_values


def test_jacobian_matches_finite_differences():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((40, 4)), rng.standard_normal((40, 3))
    m = fit_krr(x, y, ridge=1e-3)
    q, eps = rng.standard_normal((5, 4)), 1e-6
    J = m.jacobians(q)
    fd = np.stack([(m.predict(q + eps * e) - m.predict(q - eps * e)) / (2 * eps) for e in np.eye(4)], axis=2)
    assert J.shape == (5, 3, 4) and np.allclose(J, fd, rtol=1e-5, atol=1e-8)


def test_interpolates_with_tiny_ridge():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((30, 3)), rng.standard_normal((30, 2))
    m = fit_krr(x, y, ridge=1e-12)
    assert np.allclose(m.predict(x), y, atol=1e-5)


def test_jacobian_rank_is_min_of_N_din_dout_for_generic_targets():
    rng = np.random.default_rng(2)
    q = rng.standard_normal((4, 10))
    x, y = rng.standard_normal((6, 10)), rng.standard_normal((6, 8))  # N = 6 < d_in, d_out
    assert (numerical_rank(singular_values(fit_krr(x, y).jacobians(q)), 1e-8) == 6).all()
    x, y = rng.standard_normal((200, 10)), rng.standard_normal((200, 8))  # d_out = 8 smallest
    assert (numerical_rank(singular_values(fit_krr(x, y).jacobians(q)), 1e-8) == 8).all()


def test_jacobian_rank_bounded_by_rank_of_Y():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((100, 10))
    y = np.tanh(x[:, :2]) @ rng.standard_normal((2, 8))  # Rank Y = 2
    assert (numerical_rank(singular_values(fit_krr(x, y).jacobians(rng.standard_normal((5, 10)))), 1e-8) <= 2).all()


def test_median_bandwidth():
    x = np.array([[0.0], [1.0], [3.0]])  # pairwise distances 1, 3, 2
    assert fit_krr(x, x).bandwidth == 2.0
