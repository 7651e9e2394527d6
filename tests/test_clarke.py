"""Clarke stationarity at ReLU kinks (analysis/clarke.py) against a hand-written gradient minimised by multi-start L-BFGS-B."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from repcost.analysis import clarke
from repcost.analysis.clarke import clarke_gradient_norm
from repcost.models import MODELS

LAM = 1e-2
X = np.array([-1.0, -0.4, 0.1, 0.5, 1.2])
Y = np.array([0.3, -0.2, 0.4, 0.1, -0.3])


def _net(kinks: dict[int, int]):
    """A 1-D two-layer ReLU net (width 4, float64); unit k's kink exactly on data point kinks[k]."""
    spec = MODELS.get("linear_relu")
    m = spec.build(spec.schema(depth=2, width=4), 1, 1, torch.Generator().manual_seed(1)).double()
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        m.b.copy_(torch.randn(4, generator=g, dtype=torch.float64))
        m.c.fill_(0.05)
        for k, n in kinks.items():
            m.b[k] = -(m.linear[0][k, 0] * X[n])
    return m


def _hand_gradient(m, slopes: dict[tuple[int, int], float]) -> np.ndarray:
    """∇ of (1/N)Σ(f − y)² + λ(‖w‖² + ‖a‖²), with slope slopes[(n, k)] at the kinked pre-activations."""
    w, b = m.linear[0].detach().numpy()[:, 0], m.b.detach().numpy()
    a, c = m.a.detach().numpy()[0], float(m.c.detach()[0])
    z = X[:, None] * w[None, :] + b[None, :]
    d = (z > 0).astype(float)
    for (n, k), s in slopes.items():
        d[n, k] = s
    r = np.maximum(z, 0) @ a + c - Y
    N = len(X)
    gw = 2 / N * ((r[:, None] * d * a[None, :]) * X[:, None]).sum(0) + 2 * LAM * w
    gb = 2 / N * (r[:, None] * d * a[None, :]).sum(0)
    ga = 2 / N * (r[:, None] * np.maximum(z, 0)).sum(0) + 2 * LAM * a
    return np.concatenate([gw, gb, ga, [2 / N * r.sum()]])


def _clarke(m):
    x, y = torch.tensor(X)[:, None], torch.tensor(Y)[:, None]
    return clarke_gradient_norm(m, x, y, "mse", LAM, "one")


def test_without_kinks_it_is_the_plain_gradient_norm():
    m = _net({})
    value, n, _ = _clarke(m)
    assert n == 0
    assert value == pytest.approx(np.linalg.norm(_hand_gradient(m, {})), rel=1e-12)


@pytest.mark.parametrize("exact_kinks", [256, 0], ids=["exact-columns", "matrix-free"])
def test_at_kinks_it_is_the_least_gradient_norm_over_the_slopes(exact_kinks, monkeypatch):
    monkeypatch.setattr(clarke, "EXACT_KINKS", exact_kinks)
    monkeypatch.setattr(clarke, "EXACT_ENTRIES", exact_kinks)
    m = _net({0: 3, 2: 1})
    x, y = torch.tensor(X)[:, None], torch.tensor(Y)[:, None]
    value, n, _ = clarke_gradient_norm(m, x, y, "mse", LAM, "one")
    assert n == 2
    cells = [(3, 0), (1, 2)]

    def norm2(s):
        return float(np.sum(_hand_gradient(m, dict(zip(cells, s))) ** 2))

    starts = itertools.product([0.0, 0.5, 1.0], repeat=2)
    best = min(minimize(norm2, s0, bounds=[(0, 1)] * 2, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12}).fun
               for s0 in starts)
    assert value == pytest.approx(np.sqrt(best), rel=1e-6)
    corners = [np.sqrt(norm2(s)) for s in itertools.product([0.0, 1.0], repeat=2)]
    assert value < min(corners) * (1 - 1e-4)  # here the least norm is not at a one-sided (autograd) slope


def test_too_many_kinks_is_not_computed():
    m = _net({0: 1, 2: 3})
    x, y = torch.tensor(X)[:, None], torch.tensor(Y)[:, None]
    value, n, _ = clarke_gradient_norm(m, x, y, "mse", LAM, "one", max_kinks=1)
    assert n == 2 and np.isnan(value)


def test_the_certificate_reports_the_kinks_and_their_least_gradient():
    from repcost.analysis.critical import critical_point_certificate

    m = _net({0: 3, 2: 1})
    x, y = torch.tensor(X)[:, None], torch.tensor(Y)[:, None]
    cert = critical_point_certificate(m, x, y, "mse", LAM, "one")
    value, _, _ = _clarke(m)
    reg = 2 * LAM * float(sum((p.detach() ** 2).sum() for p in m.regularised_params())) ** 0.5
    assert cert["kinks"] == 2
    assert cert["clarke_stationarity"] == pytest.approx(value / reg, rel=1e-12)
    assert cert["clarke_stationarity"] < cert["stationarity"]
    assert cert["critical_point"] is False  # a random net: far from stationary either way
    smooth = critical_point_certificate(_net({}), x, y, "mse", LAM, "one")
    assert "kinks" not in smooth and "clarke_stationarity" not in smooth


def test_kinks_of_a_cut_off_unit_are_left_out():
    """A unit with zero in- and outgoing weights is kinked at every point and moves no gradient entry."""
    m = _net({0: 3})
    with torch.no_grad():
        m.linear[0][3] = 0.0
        m.b[3], m.a[0, 3] = 0.0, 0.0
    x, y = torch.tensor(X)[:, None], torch.tensor(Y)[:, None]
    value, n, _ = clarke_gradient_norm(m, x, y, "mse", LAM, "one", max_kinks=1)
    assert n == 1  # the dead unit is kinked at all five points, but its slopes move nothing

    def norm(s):
        return float(np.linalg.norm(_hand_gradient(m, {(3, 0): s})))

    best = min(minimize(lambda s: norm(s[0]) ** 2, [s0], bounds=[(0, 1)], method="L-BFGS-B",
                        options={"ftol": 1e-15, "gtol": 1e-12}).fun for s0 in (0.0, 0.5, 1.0))
    assert value == pytest.approx(np.sqrt(best), rel=1e-6)


def test_with_kinks_in_two_layers_it_is_no_worse_than_descent_over_one_layer_at_a_time():
    """With kinks in two layers G is bilinear in (layer-1 slopes, layer-2 slopes), so the columns taken at s₀ hold
    there only. A polished Jacot 2022 Fig 1 net (stored: inputs in the data's span, 5 and 3 units, kinks in both
    layers): minimising ‖G‖ over one layer's slopes at a time (BVLS, exact since G is affine in them) is an
    independent estimate of the least norm, and the certificate's element must be at least as small."""
    from scipy.optimize import lsq_linear

    from helpers import stored_net

    m, x, y = stored_net("jacot22_fig1_polished.json", "fc", 42, 3, depth=3, width=[5, 3])
    _, masks, lo, G, _ = clarke.kinked(m, x, y, "cross_entropy", 1e-2, "one")
    layer = np.concatenate([np.full(int(k.sum()), i) for i, k in enumerate(masks)])
    assert len(set(layer)) == 2

    def grad(s: np.ndarray) -> np.ndarray:
        return G(torch.tensor(s)).detach().numpy()

    s = lo.copy()
    for _ in range(30):
        for idx in (np.flatnonzero(layer == i) for i in (0, 1)):
            g = grad(s)
            J = np.stack([grad(np.where(np.arange(len(s)) == j, s + 1.0, s)) - g for j in idx], axis=1)
            s[idx] = lsq_linear(J, J @ s[idx] - g, bounds=(lo[idx], np.ones(len(idx))), method="bvls", tol=1e-14).x
    assert clarke_gradient_norm(m, x, y, "cross_entropy", 1e-2, "one")[0] <= np.linalg.norm(grad(s))
