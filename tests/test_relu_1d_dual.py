"""The duality gap of 1-D two-layer ReLU nets (analysis/relu_1d_dual.py, relu_1d_dual.duality_gap) and the exact
convex solve behind it (analysis/relu_1d_convex.py): a lower bound on the global minimum, tight at it, checked
against an independent primal solve and Savarese Thm 3.3's spline."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scipy.optimize import minimize

from repcost.analysis import spline_min_cost
from repcost.analysis.relu_1d_convex import MAX_POINTS, convex_minimum
from repcost.analysis.relu_1d_dual import duality_gap, relu_1d_duality_gap
from repcost.models import MODELS

F64 = torch.float64


def _data(n: int = 7, seed: int = 0):
    g = np.random.default_rng(seed)
    x = np.sort(g.uniform(-2, 2, n))
    return x, g.normal(0, 1, n)


def _lasso(x: np.ndarray, y: np.ndarray, rho: float):
    """The convex problem solved in the primal: min (1/N)‖Φ(u − v) + c − y‖² + 2ρΣ(u + v), u, v ≥ 0, over the
    2N unit-slope features with kinks at the data points (L-BFGS-B with bounds; a different solver, a different
    problem form). Returns (value, coefficients η, c)."""
    n = len(x)
    phi = np.maximum(np.concatenate([x[:, None] - x[None, :], x[None, :] - x[:, None]], axis=1), 0.0)
    m = phi.shape[1]

    def fun(z):
        u, v, c = z[:m], z[m:2 * m], z[-1]
        r = phi @ (u - v) + c - y
        val = r @ r / n + 2 * rho * (u.sum() + v.sum())
        g = 2 / n * (phi.T @ r)
        return val, np.concatenate([g + 2 * rho, -g + 2 * rho, [2 / n * r.sum()]])

    res = minimize(fun, np.zeros(2 * m + 1), jac=True, method="L-BFGS-B",
                   bounds=[(0, None)] * (2 * m) + [(None, None)], options={"maxiter": 20000, "ftol": 1e-16, "gtol": 1e-13})
    return res.fun, res.x[:m] - res.x[m:2 * m], res.x[-1]


def _net_from(x: np.ndarray, eta: np.ndarray, c: float):
    """A balanced linear_relu net of width 2N whose unit j is η_j·[s(x − x_j)]₊."""
    n = len(x)
    spec = MODELS.get("linear_relu")
    m = spec.build(spec.schema(depth=2, width=2 * n), 1, 1, torch.Generator().manual_seed(0)).double()
    s = np.concatenate([np.ones(n), -np.ones(n)])
    t = np.sqrt(np.abs(eta))
    with torch.no_grad():
        m.linear[0][:, 0] = torch.tensor(s * t)
        m.b[:] = torch.tensor(-s * np.concatenate([x, x]) * t)
        m.a[0] = torch.tensor(np.sign(eta) * t)
        m.c[0] = c
    return m


@pytest.mark.parametrize("rho", [1e-1, 1e-2, 1e-3])
def test_the_gap_closes_at_the_minimum_an_independent_primal_solve_finds(rho):
    x, y = _data()
    p_star, eta, c = _lasso(x, y, rho)
    net = _net_from(x, eta, c)
    xt, yt = torch.tensor(x)[:, None], torch.tensor(y)[:, None]
    obj = float((((net(xt) - yt) ** 2).mean() + rho * net.param_sq_norm()).detach())
    assert obj == pytest.approx(p_star, rel=1e-9)  # the balanced net realises the lasso's objective
    gap = duality_gap(net, xt, yt, "mse", rho)
    assert gap["dual_value"] <= p_star * (1 + 1e-9)  # weak duality
    assert gap["duality_gap_rel"] < 1e-6 and gap["dual_violation"] < 1 + 1e-3


def test_every_net_is_above_the_bound_and_the_bound_is_below_the_minimum():
    x, y = _data(seed=1)
    rho = 1e-2
    p_star, _, _ = _lasso(x, y, rho)
    xt, yt = torch.tensor(x)[:, None], torch.tensor(y)[:, None]
    spec = MODELS.get("linear_relu")
    for seed in range(15):  # random nets, far from any minimum: D ≤ min ≤ objective, whatever the dual point
        net = spec.build(spec.schema(depth=2, width=9, kink_range=2.0), 1, 1, torch.Generator().manual_seed(seed)).double()
        gap = duality_gap(net, xt, yt, "mse", rho)
        obj = float((((net(xt) - yt) ** 2).mean() + rho * net.param_sq_norm()).detach())
        assert gap["dual_value"] <= p_star * (1 + 1e-9) <= obj
        assert gap["duality_gap"] == pytest.approx(obj - gap["dual_value"], rel=1e-12)
        own = relu_1d_duality_gap(xt[:, 0], net(xt), yt, rho, obj, solve=False)  # the net's own point alone
        assert own["dual_value"] <= gap["dual_value"] + 1e-15


def test_small_rho_recovers_the_spline_minimum_of_savarese_thm_3_3():
    """As ρ → 0 the minimum is 2ρ·(least path norm of an interpolant) + O(ρ²), and that least path norm is
    spline_min_cost (Savarese et al. 2019 Thm 3.3): the dual's value, found by the solver alone, agrees."""
    x, y = _data(n=9, seed=2)
    rho = 1e-7
    zero = torch.zeros(len(x), 1, dtype=F64)  # f = 0: its own dual point is useless, the solver does the work
    d = relu_1d_duality_gap(torch.tensor(x), zero, torch.tensor(y)[:, None], rho, 1.0)
    assert d["dual_value"] / (2 * rho) == pytest.approx(spline_min_cost(x, y), rel=1e-4)


def test_closed_form_at_large_rho_and_a_zero_output_column():
    x, y = _data(seed=3)
    # ρ so large that no unit pays: f = mean(y), the minimum is the variance, and the gap is 0
    f = torch.full((len(y), 1), float(y.mean()), dtype=F64)
    d = relu_1d_duality_gap(torch.tensor(x), f, torch.tensor(y)[:, None], 1e3, float(np.var(y)))
    assert d["duality_gap"] == pytest.approx(0.0, abs=1e-12) and d["dual_violation"] < 1
    # a second output that is 0 everywhere changes nothing (the group norm of (η, 0) is |η|)
    rho = 1e-2
    one = relu_1d_duality_gap(torch.tensor(x), torch.zeros(len(x), 1, dtype=F64), torch.tensor(y)[:, None], rho, 1.0)
    two = relu_1d_duality_gap(torch.tensor(x), torch.zeros(len(x), 2, dtype=F64),
                              torch.tensor(np.stack([y, np.zeros_like(y)], 1)), rho, 1.0)
    assert two["dual_value"] == pytest.approx(one["dual_value"], rel=1e-6)


def test_other_nets_report_no_gap():
    spec = MODELS.get("linear_relu")
    x, y = torch.zeros(5, 2, dtype=F64), torch.zeros(5, 1, dtype=F64)
    deep = spec.build(spec.schema(depth=3, width=4), 1, 1, torch.Generator().manual_seed(0)).double()
    assert duality_gap(deep, x[:, :1], y, "mse", 1e-3) == {}
    wide_in = spec.build(spec.schema(depth=2, width=4), 2, 1, torch.Generator().manual_seed(0)).double()
    assert duality_gap(wide_in, x, y, "mse", 1e-3) == {}
    fc = MODELS.get("fc")
    assert duality_gap(fc.build(fc.schema(depth=2, width=4), 1, 1, torch.Generator().manual_seed(0)),
        x[:, :1], y, "mse", 1e-3) == {}


def test_every_1d_two_layer_run_reports_its_gap(tmp_path):
    """Through the CLI: summary.json carries the gap (≥ 0 up to the solver's round-off: it is a bound from below
    on the minimum) and the CLI prints it; a deeper net has none."""
    import json

    from conftest import cli

    p = cli("repcost-train", "train.phases.0.steps=300", "train.phases.1.steps=100", f"hydra.run.dir={tmp_path / 'a'}",
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert 0 <= s["cert.duality_gap_rel"] <= 1 and s["cert.dual_value"] <= s["objective"] * (1 + 1e-9)
    assert s["cert.duality_gap"] == pytest.approx(s["objective"] - s["cert.dual_value"], rel=1e-9, abs=1e-15)
    assert "global minimum: the objective is at most" in p.stdout + p.stderr
    p = cli("repcost-train", "model.depth=3", "train.phases.0.steps=5", "train.phases.1.steps=5",
            f"hydra.run.dir={tmp_path / 'b'}", cwd=tmp_path)
    assert p.returncode == 0 and "cert.duality_gap_rel" not in json.loads((tmp_path / "b" / "summary.json").read_text())


@pytest.mark.parametrize("rho", [1e-2, 5e-8])
def test_placing_the_convex_minimiser_reaches_the_independent_primal_and_closes_the_gap(rho):
    """units.place_convex_minimum (the exact solve's coefficients, as a net) against this file's lasso solve and
    against the solve's own dual value, down to the min-norm recipes' tiny ρ; the net's duality gap is ≈ 0."""
    from repcost.analysis.units import place_convex_minimum

    x, y = _data(n=9, seed=2)
    xt, yt = torch.tensor(x)[:, None], torch.tensor(y)[:, None]
    spec = MODELS.get("linear_relu")
    net = spec.build(spec.schema(depth=2, width=2 * len(x)), 1, 1, torch.Generator().manual_seed(0)).double()
    assert place_convex_minimum(net, xt, yt, rho) > 0
    obj = float((((net(xt) - yt) ** 2).mean() + rho * net.param_sq_norm()).detach())
    if rho >= 1e-3:  # L-BFGS-B on this file's form stalls short of the minimum at the tiniest ρ
        assert obj == pytest.approx(_lasso(x, y, rho)[0], rel=1e-6)
    assert obj == pytest.approx(convex_minimum(x, y, rho).dual_value, rel=1e-7)
    assert duality_gap(net, xt, yt, "mse", rho)["duality_gap_rel"] < 1e-7
    small = spec.build(spec.schema(depth=2, width=2), 1, 1, torch.Generator().manual_seed(0)).double()
    with pytest.raises(ValueError, match="raise model.width"):
        place_convex_minimum(small, xt, yt, rho)


@pytest.mark.parametrize(("n", "rho", "d", "pair"), [(9, 1e-2, 1, 0), (150, 5e-8, 1, 0), (60, 1e-5, 1, 0),
                                                     (12, 1e-3, 2, 0), (9, 5e-8, 1, 1e-3)])
def test_the_exact_solve_meets_its_dual(n, rho, d, pair):
    """convex_minimum's value (the objective of its coefficients) and its dual value (D at its dual point) are
    two computations that meet only at the minimum, here on 150 points at the recipes' ρ too, and with two
    points `pair` apart carrying different labels (slopes ~10³); where L-BFGS-B converges, the independent
    lasso solve agrees."""
    g = np.random.default_rng(n)
    x = np.sort(g.uniform(-2, 2, n))
    if pair:
        x[1] = x[0] + pair
    y = np.sin(2 * x)[:, None] * np.arange(1, d + 1) + g.normal(0, 0.3, (n, d))
    cm = convex_minimum(x, y, rho)
    assert cm.dual_value <= cm.value * (1 + 1e-12)  # weak duality
    assert cm.value == pytest.approx(cm.dual_value, rel=1e-7)
    assert cm.eta.shape == (len(cm.kinks), d) and len(cm.kinks) <= 2 * n
    if rho >= 1e-3 and d == 1:
        assert cm.value == pytest.approx(_lasso(x, y[:, 0], rho)[0], rel=1e-6)
    with pytest.raises(ValueError, match=f"at most {MAX_POINTS} points"):
        convex_minimum(np.linspace(0, 1, MAX_POINTS + 1), np.zeros(MAX_POINTS + 1), rho)
