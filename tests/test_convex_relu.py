"""Exact min R2 by the convex program (Pilanci & Ergen 2020 with free biases) against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("cvxpy")

from repcost.analysis import min_r2_interpolant, path_norm, spline_min_cost
from repcost.analysis.convex_relu import arrangement_patterns, dual_bound
from repcost.analysis.relu_1d import TwoLayerNet, deep_relu_net_1d_function
from repcost.analysis.two_rays import (
    projection_interpolant,
    ray_units,
    f_and_g,
)


def data_1d(seed: int):
    g = np.random.default_rng(seed)
    n = int(g.integers(3, 11))
    x = np.sort(g.uniform(-2.0, 3.0, n))
    return x, g.uniform(0.1, 2.0) * g.standard_normal(n)


@pytest.mark.parametrize("seed", range(4))
def test_1d_equals_spline_minimum(seed):
    """Savarese et al. 2019 Thm 3.3: min R̄ = spline_min_cost; the net's own R̄ (read off its kinks) agrees."""
    x, y = data_1d(seed)
    r = min_r2_interpolant(x, y)
    ref = spline_min_cost(x, y)
    assert r.value == pytest.approx(ref, rel=1e-5)
    assert r.lower_bound == pytest.approx(ref, rel=1e-5)
    net = r.net
    assert np.max(np.abs(net(x[:, None]) - y)) < 1e-5 * max(1.0, np.max(np.abs(y)))
    assert deep_relu_net_1d_function([net.W, net.a[None, :]], [net.b, [net.c]]).rbar() == pytest.approx(ref, rel=1e-5)
    # balanced: C(θ) = ½(‖a‖² + ‖W‖²) equals the path norm
    assert 0.5 * (net.a @ net.a + np.sum(net.W**2)) == pytest.approx(r.value, rel=1e-9)


def test_1d_pattern_count():
    """Threshold sets {x ≥ t}, {x ≤ t} of N distinct points: 2N − 1 non-empty patterns."""
    for n in (2, 5, 9):
        assert arrangement_patterns(np.linspace(0, 1, n)[:, None]).shape == (2 * n - 1, n)


def test_2d_pattern_count_general_position_and_coverage():
    """N points in general position: the central arrangement of N planes in R³ has N² − N + 2 chambers
    (one empty); every pattern of a random affine unit is among them."""
    g = np.random.default_rng(0)
    x = g.standard_normal((9, 2))
    P = arrangement_patterns(x)
    assert P.shape == (9 * 9 - 9 + 1, 9)
    known = {p.tobytes() for p in P}
    for _ in range(2000):
        w, b = g.standard_normal(2), 2 * g.standard_normal()
        p = x @ w + b > 0
        assert not p.any() or p.tobytes() in known


def test_2d_collinear_data_reduce_to_1d():
    """Data on a line: a 2-D net restricted to the line is a 1-D net of no larger path norm, so min R2 is the
    1-D spline minimum of the positions along the line (also exercises the degenerate enumeration)."""
    g = np.random.default_rng(1)
    t = np.sort(g.uniform(-1, 2, 7))
    u, p = np.array([0.6, 0.8]), np.array([0.3, -0.2])
    y = g.standard_normal(7)
    r = min_r2_interpolant(p + t[:, None] * u, y)
    assert r.value == pytest.approx(spline_min_cost(t, y), rel=1e-5)


def test_2d_rigid_motion_and_scaling():
    """R2 is invariant under rotations and translations of x and scales as 1/s when x ↦ s·x."""
    g = np.random.default_rng(2)
    x, y = g.standard_normal((8, 2)), g.standard_normal(8)
    base = min_r2_interpolant(x, y).value
    c, s = math.cos(0.7), math.sin(0.7)
    moved = x @ np.array([[c, -s], [s, c]]).T + np.array([3.0, -1.0])
    assert min_r2_interpolant(moved, y).value == pytest.approx(base, rel=1e-5)
    assert min_r2_interpolant(2.5 * x, y).value == pytest.approx(base / 2.5, rel=1e-5)


def test_2d_two_rays_below_constructions_with_certificate():
    """On two-ray data the minimum lies below §5.2's f and g and below a projection interpolant, the
    reconstructed net interpolates, and the dual lower bound closes the gap."""
    w1 = np.array([2.0, 1.0]) / math.sqrt(5)
    c, s = math.cos(0.6 * math.pi), math.sin(0.6 * math.pi)
    w2 = np.array([[c, -s], [s, c]]) @ w1
    t = np.array([0.2, 0.4, 0.7, 1.0])
    y1, y2 = 0.8 * t + 0.1, -0.5 * t + 0.3
    x, y = np.concatenate([t[:, None] * w1, t[:, None] * w2]), np.concatenate([y1, y2])
    r = min_r2_interpolant(x, y)
    assert np.max(np.abs(r.net(x) - y)) < 1e-6
    assert r.gap < 1e-5
    units = [ray_units(t, y1), ray_units(t, y2)]
    for net in (*f_and_g(w1, w2, units), projection_interpolant(x, y, w1 - w2)):
        assert np.allclose(net(x), y)
        assert r.value <= path_norm(net.W, net.a) * (1 + 1e-6)
    assert path_norm(r.net.W, r.net.a) == pytest.approx(r.value, rel=1e-9)


def test_random_nets_never_beat_the_minimum():
    """Any net interpolates its own outputs, so its path norm is ≥ min R2 of (x, net(x)) ≥ the dual bound."""
    g = np.random.default_rng(3)
    x = g.standard_normal((7, 2))
    for _ in range(3):
        net = TwoLayerNet(g.standard_normal((5, 2)), g.standard_normal(5), g.standard_normal(5), 0.3)
        y = net(x)
        r = min_r2_interpolant(x, y)
        assert r.lower_bound <= r.value * (1 + 1e-6) <= path_norm(net.W, net.a) * (1 + 1e-5)
        # weak duality holds for any λ, not just the solver's
        lb = dual_bound(x, y, g.standard_normal(7))
        assert lb <= path_norm(net.W, net.a) * (1 + 1e-9)


def test_trained_net_never_beats_the_minimum():
    """A short weight-decay training run on 2-D data: its path norm is ≥ min R2 of the values it fits."""
    import torch

    from repcost.models.linear_relu import LinearReLU, LinearReLUConfig

    g = np.random.default_rng(4)
    x, y = g.standard_normal((6, 2)), g.standard_normal(6)
    model = LinearReLU(LinearReLUConfig(width=20, kink_range=1.0), 2, 1, torch.Generator().manual_seed(0))
    X, Y = torch.as_tensor(x), torch.as_tensor(y)[:, None]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(400):
        opt.zero_grad()
        loss = ((model(X) - Y) ** 2).mean() + 1e-3 * 0.5 * sum((p**2).sum() for p in model.regularised_params())
        loss.backward()
        opt.step()
    with torch.no_grad():
        fitted = model(X)[:, 0].numpy()
        W, a = model.effective_matrix().numpy(), model.a[0].numpy()
    assert min_r2_interpolant(x, fitted).value <= path_norm(W, a) * (1 + 1e-6)
