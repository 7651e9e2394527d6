"""Ongie & Willett §5.2–5.3 constructions: f and g interpolate, Prop 5.2, projections, alignment."""

from __future__ import annotations

import math

import numpy as np
import pytest

from repcost.analysis import path_norm, phi_L
from repcost.analysis.relu_1d import TwoLayerNet
from repcost.analysis.two_rays import (alignment_summary, directional_variation, line_angle, net_from_model,
                                       projection_interpolant, prop52_margin, ray_units, f_and_g)


def rays(alpha, t=(0.2, 0.5, 0.8, 1.0), y1=(0.2, 0.5, 0.6, 0.9), y2=(0.1, 0.2, 0.3, 0.5)):
    w1 = np.array([2.0, 1.0]) / math.sqrt(5)
    c, s = math.cos(alpha), math.sin(alpha)
    w2 = np.array([[c, -s], [s, c]]) @ w1
    t = np.array(t)
    x = np.concatenate([t[:, None] * w1, t[:, None] * w2])
    y = np.concatenate([y1, y2])
    return w1, w2, x, y, [ray_units(t, y1), ray_units(t, y2)]


def test_line_angle_converts_ray_separation():
    assert line_angle(2 * math.pi / 3) == pytest.approx(math.pi / 3)
    assert line_angle(0.55 * math.pi) == pytest.approx(0.45 * math.pi)
    assert line_angle(math.pi / 3) == pytest.approx(math.pi / 3)


def test_ray_units_reproduce_the_spline_through_origin():
    t, y = np.array([0.2, 0.5, 1.0]), np.array([0.4, 0.4, 1.4])
    a, tau = ray_units(t, y)
    f = lambda s: np.sum(a * np.maximum(s - tau, 0.0))  # noqa: E731
    assert [f(s) for s in t] == pytest.approx(list(y))
    assert tau[0] == 0 and a.tolist() == pytest.approx([2.0, -2.0, 2.0])


@pytest.mark.parametrize("alpha", [0.52 * math.pi, 0.55 * math.pi, 2 * math.pi / 3, 0.9 * math.pi])
def test_f_and_g_interpolate_and_R2_f_below_R2_g(alpha):
    w1, w2, x, y, rs = rays(alpha)
    f, g = f_and_g(w1, w2, rs)
    assert np.allclose(f(x), y) and np.allclose(g(x), y)
    assert path_norm(f.W, f.a) < path_norm(g.W, g.a)  # Prop 5.2, first claim
    assert np.linalg.matrix_rank(g.W) == 1
    # g has unit rows along ±w0 and ã = a/sin(α/2): Cor 3.6 gives Φ3(g) = (‖a‖₁/sin(α/2))^{2/3}
    n1 = np.sum(np.abs(np.concatenate([r[0] for r in rs])))
    assert phi_L(g.W, g.a, 3) == pytest.approx((n1 / math.sin(alpha / 2)) ** (2 / 3), rel=1e-8)


def test_prop52_condition_implies_R3_g_below_R3_f():
    held = 0
    for alpha in np.linspace(0.51, 0.99, 7) * math.pi:
        for y2 in [(0.1, 0.2, 0.3, 0.5), (0.02, 0.05, 0.06, 0.08)]:
            w1, w2, x, y, rs = rays(alpha, y2=y2)
            f, g = f_and_g(w1, w2, rs)
            if prop52_margin(alpha, rs[0][0], rs[1][0]) >= 0:
                held += 1
                assert phi_L(g.W, g.a, 3) < phi_L(f.W, f.a, 3)
    assert held > 3


def test_prop52_margin_balanced_single_units():
    # ‖a1‖ = ‖a2‖: condition 1/cos²(θ/2) ≤ 1 + sin θ, which holds for all θ ∈ (0, π/2]
    assert all(prop52_margin(a, [1.0], [1.0]) >= -1e-12 for a in np.linspace(0.51, 0.99, 20) * math.pi)
    # very unbalanced weights near α = π/2 (θ → π/2): fails
    assert prop52_margin(0.52 * math.pi, [1.0], [0.01]) < 0


def test_projection_interpolant_is_rank_one_and_interpolates():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(8, 2))
    y = np.sin(3 * x[:, 0])
    u = np.array([1.0, 0.3])
    h = projection_interpolant(x, y, u)
    assert np.allclose(h(x), y)
    assert np.linalg.matrix_rank(h.W) == 1 and alignment_summary(h, -u)["v1_angle_to_w0_deg"] < 1e-6
    assert directional_variation(h, rng.uniform(-1, 1, size=(50, 2)), u) < 1e-12
    assert phi_L(h.W, h.a, 3) == pytest.approx(path_norm(h.W, h.a) ** (2 / 3), rel=1e-8)  # Cor 3.6


def test_alignment_helpers():
    W = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])  # unit angles to the rays: 0, 0, 90 (the line, not the ray)
    s = alignment_summary(TwoLayerNet(W, np.array([2.0, 1.0, 2.0]), np.zeros(3)), [0.0, -1.0], [[1.0, 0.0], [0.0, 1.0]])
    assert s["unit_angle_to_rays_deg"] == pytest.approx(30.0)  # weights |a_k|‖w_k‖ = 2, 2, 2
    assert s["v1_angle_to_w0_deg"] == pytest.approx(0.0, abs=1e-6)  # WᵀW = diag(2, 4): W's top direction is (0, ±1)
    h = TwoLayerNet(np.array([[0.0, 1.0]]), np.array([1.0]), np.array([5.0]))
    assert directional_variation(h, np.zeros((3, 2)), [1.0, 0.0]) == pytest.approx(1.0)


def test_net_from_model_matches_linear_relu_and_prunes_dead_units():
    import torch

    from repcost.models import build_model
    from repcost.registry import MODELS

    cfg = MODELS.get("linear_relu").schema(depth=3, width=6)
    m = build_model(cfg, 2, 1, 0).double()
    with torch.no_grad():
        m.b.copy_(torch.linspace(-0.5, 0.5, 6, dtype=torch.float64))
        m.c.fill_(0.3)
        m.a[0, 2] = 1e-300  # a dead unit
    net = net_from_model(m)
    x = np.random.default_rng(1).normal(size=(20, 2))
    with torch.no_grad():
        ref = m(torch.as_tensor(x)).numpy()[:, 0]
    assert np.allclose(net(x), ref, atol=1e-12) and net.W.shape == (5, 2)
    s = alignment_summary(net, [1.0, 0.0], [[1.0, 0.0], [0.0, 1.0]])
    assert 0 <= s["s2_over_s1"] <= 1 and 0 <= s["unit_angle_to_rays_deg"] <= 180
