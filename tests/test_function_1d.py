"""Exact piecewise-linear functions of univariate deep ReLU nets and their R̄ (Savarese Thm 3.1)."""

from __future__ import annotations

import numpy as np
import torch

from repcost.analysis.relu_1d import deep_relu_net_1d_function
from repcost.models import build_model
from repcost.models.fc import FCConfig
from repcost.models.linear_relu import LinearReLUConfig


def rbar_on_grid(x, f) -> float:
    """R̄ estimated from samples f(x) on a sorted grid: Σ|Δ slope| and the two outer slopes (independent of the
    knot propagation, not exact)."""
    s = np.diff(f) / np.diff(x)
    return float(max(np.sum(np.abs(np.diff(s))), abs(s[0] + s[-1])))


def _forward(Ws, bs, x, slope=0.0):
    h = x[:, None]
    for i, (W, b) in enumerate(zip(Ws, bs)):
        h = h @ W.T + b
        if i < len(Ws) - 1:
            h = np.where(h > 0, h, slope * h)
    return h[:, 0]


def _random_net(rng, widths):
    dims = [1, *widths, 1]
    Ws = [rng.normal(size=(dims[i + 1], dims[i])) for i in range(len(dims) - 1)]
    bs = [rng.normal(size=dims[i + 1]) for i in range(len(dims) - 1)]
    return Ws, bs


def test_deep_net_function_matches_forward_everywhere():
    rng = np.random.default_rng(0)
    for widths, slope in [([7], 0.0), ([6, 5], 0.0), ([5, 4, 6], 0.0), ([4, 4], 0.3)]:
        Ws, bs = _random_net(rng, widths)
        f = deep_relu_net_1d_function(Ws, bs, slope=slope)
        lo, hi = f.knots[0] - 3.0, f.knots[-1] + 3.0
        x = np.linspace(lo, hi, 4001)
        np.testing.assert_allclose(f(x), _forward(Ws, bs, x, slope), rtol=1e-9, atol=1e-9)
        # outer slopes are the slopes of the function far away
        far = np.array([lo - 100.0, lo - 99.0, hi + 99.0, hi + 100.0])
        y = _forward(Ws, bs, far, slope)
        np.testing.assert_allclose([y[1] - y[0], y[3] - y[2]], [f.slopes[0], f.slopes[-1]], rtol=1e-9, atol=1e-9)
        # R̄ from the exact kinks agrees with a fine grid covering every kink
        grid = np.sort(np.concatenate([x, f.knots - 1e-7, f.knots + 1e-7]))
        assert abs(f.rbar() - rbar_on_grid(grid, _forward(Ws, bs, grid, slope))) < 1e-4 * max(1.0, f.rbar())


def test_identity_and_abs_nets():
    # |x| = relu(x) + relu(−x): one kink of jump 2, end slopes −1 and +1, R̄ = 2
    f = deep_relu_net_1d_function([np.array([[1.0], [-1.0]]), np.array([[1.0, 1.0]])], None)
    assert np.allclose(f.knots, [0.0]) and np.isclose(f.rbar(), 2.0)
    # x = relu(x) − relu(−x): no kink, R̄ = |1 + 1| = 2
    g = deep_relu_net_1d_function([np.array([[1.0], [-1.0]]), np.array([[1.0, -1.0]])], None)
    assert np.isclose(np.abs(g.jumps).sum(), 0.0) and np.isclose(g.rbar(), 2.0)


def test_model_dispatch_fc_and_linear_relu():
    gen = torch.Generator().manual_seed(0)
    fc = build_model(FCConfig(depth=4, width=8, beta=1.0, bias_regularised=False), 1, 1, 0).double()
    with torch.no_grad():
        for b in fc.bias_vectors():
            b.normal_(generator=gen)
    lr = build_model(LinearReLUConfig(depth=3, width=8), 1, 1, 0).double()
    with torch.no_grad():
        lr.b.normal_(generator=gen)
    x = torch.linspace(-5, 5, 1001, dtype=torch.float64)[:, None]
    for m in (fc, lr):
        chain = m.affine_chain()
        f = deep_relu_net_1d_function(chain.weights, chain.biases, chain.slope)
        with torch.no_grad():
            np.testing.assert_allclose(f(x[:, 0].numpy()), m(x)[:, 0].numpy(), rtol=1e-9, atol=1e-9)


def test_far_kinks_do_not_spoil_precision():
    # a unit with a tiny input weight puts a kink near x = −1e12; slopes must stay exact near the data
    rng = np.random.default_rng(3)
    Ws, bs = _random_net(rng, [6, 5])
    Ws[0][0, 0], bs[0][0] = 1e-12, 1.0  # kink of unit 0 at x = −1e12
    f = deep_relu_net_1d_function(Ws, bs)
    assert f.knots[0] < -1e11
    near = f.knots[(f.knots > -10) & (f.knots < 10)]
    x = np.linspace(-10, 10, 20001)
    g = np.sort(np.concatenate([x, near - 1e-7, near + 1e-7]))
    assert abs(f.rbar() - rbar_on_grid(g, _forward(Ws, bs, g))) < 1e-4 * max(1.0, f.rbar())
    # every slope of f is a slope the forward pass shows somewhere near the data or far away
    s_grid = np.diff(_forward(Ws, bs, x)) / np.diff(x)
    inner = f.slopes[1:-1][(f.knots[1:] > -10) & (f.knots[:-1] < 10)]
    assert all(np.min(np.abs(s_grid - v)) < 1e-6 * max(1.0, abs(v)) for v in inner)


def test_a_unit_whose_kink_overflows_is_a_constant():
    """w = 1e-310 puts the kink at −b/w = ±inf (overflow): on every finite x the unit is a·[b]₊, so the net
    equals the others plus that constant and R̄ is theirs (it had been nan)."""
    w, b, a = np.array([1.0, -2.0, 1e-310]), np.array([0.3, 0.1, 0.7]), np.array([0.5, 1.5, 2.0])
    f = deep_relu_net_1d_function([w[:, None], a[None, :]], [b, [0.25]])
    g = deep_relu_net_1d_function([w[:2, None], a[None, :2]], [b[:2], [0.25 + 2.0 * 0.7]])
    x = np.linspace(-3, 3, 61)
    assert np.allclose(f(x), g(x), rtol=0, atol=1e-12)
    assert np.isfinite(f.rbar()) and f.rbar() == g.rbar()
