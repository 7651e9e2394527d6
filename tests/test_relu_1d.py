"""1-D two-layer ReLU nets (analysis/relu_1d.py): the duality gap and the exact convex solve behind it (a lower
bound on the global minimum, tight at it, checked against an independent primal solve and Savarese Thm 3.3's
spline), the placement of the minimiser, and unit insertion (train.phases[*].insert_units: the new unit is the
gap feature of largest MSE gradient, with the exact group-lasso step, placed in the net as that feature)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from repcost.analysis import spline_min_cost
from repcost.analysis.relu_1d import MAX_POINTS, best_unit, both_sides, convex_minimum, dual_at, duality_gap, features, \
    insert_units, place_convex_minimum
from repcost.models import MODELS

from helpers import assert_member_matches_single, cli, train_direct

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
    gap = duality_gap(net, xt, yt, "mse", rho, "one")
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
        calls = []
        hook = net.register_forward_hook(lambda *_: calls.append(1))
        gap = duality_gap(net, xt, yt, "mse", rho, "one")
        hook.remove()
        assert len(calls) == 1  # the net's outputs are computed once: its objective and its own dual point share them
        obj = float((((net(xt) - yt) ** 2).mean() + rho * net.param_sq_norm()).detach())
        assert gap["dual_value"] <= p_star * (1 + 1e-9) <= obj
        assert gap["duality_gap"] == pytest.approx(obj - gap["dual_value"], rel=1e-12)
        own = dual_at((net(xt).detach().numpy() - y[:, None]) / (len(x) * rho),
                      features(x, *both_sides(np.unique(x))), y[:, None], rho)  # the net's own point alone
        assert own[0] <= gap["dual_value"] + 1e-15 and own[1] == pytest.approx(gap["dual_violation"], rel=1e-12)


def _constant_net(value: float = 0.0, d_out: int = 1):
    """A two-layer linear_relu net whose weights are all 0: its function is the constant `value`, its penalty 0."""
    spec = MODELS.get("linear_relu")
    m = spec.build(spec.schema(depth=2, width=2), 1, d_out, torch.Generator().manual_seed(0)).double()
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.c += value
    return m


def test_small_rho_recovers_the_spline_minimum_of_savarese_thm_3_3():
    """As ρ → 0 the minimum is 2ρ·(least path norm of an interpolant) + O(ρ²), and that least path norm is
    spline_min_cost (Savarese et al. 2019 Thm 3.3): the dual's value, found by the solver alone, agrees."""
    x, y = _data(n=9, seed=2)
    rho = 1e-7  # f = 0: its own dual point is useless, the solver does the work
    d = duality_gap(_constant_net(), torch.tensor(x)[:, None], torch.tensor(y)[:, None], "mse", rho, "one")
    assert d["dual_value"] / (2 * rho) == pytest.approx(spline_min_cost(x, y), rel=1e-4)


def test_closed_form_at_large_rho_and_a_zero_output_column():
    x, y = _data(seed=3)
    xt = torch.tensor(x)[:, None]
    # ρ so large that no unit pays: f = mean(y), the minimum is the variance, and the gap is 0
    d = duality_gap(_constant_net(float(y.mean())), xt, torch.tensor(y)[:, None], "mse", 1e3, "one")
    assert d["duality_gap"] == pytest.approx(0.0, abs=1e-12) and d["dual_violation"] < 1
    # a second output that is 0 everywhere changes nothing (the group norm of (η, 0) is |η|)
    rho = 1e-2
    one = duality_gap(_constant_net(), xt, torch.tensor(y)[:, None], "mse", rho, "one")
    two = duality_gap(_constant_net(d_out=2), xt, torch.tensor(np.stack([y, np.zeros_like(y)], 1)), "mse", rho, "one")
    assert two["dual_value"] == pytest.approx(one["dual_value"], rel=1e-6)


def test_other_nets_report_no_gap():
    spec = MODELS.get("linear_relu")
    x, y = torch.zeros(5, 2, dtype=F64), torch.zeros(5, 1, dtype=F64)
    deep = spec.build(spec.schema(depth=3, width=4), 1, 1, torch.Generator().manual_seed(0)).double()
    assert duality_gap(deep, x[:, :1], y, "mse", 1e-3, "one") == {}
    wide_in = spec.build(spec.schema(depth=2, width=4), 2, 1, torch.Generator().manual_seed(0)).double()
    assert duality_gap(wide_in, x, y, "mse", 1e-3, "one") == {}
    fc = MODELS.get("fc")
    assert duality_gap(fc.build(fc.schema(depth=2, width=4), 1, 1, torch.Generator().manual_seed(0)),
        x[:, :1], y, "mse", 1e-3, "one") == {}


@pytest.mark.slow
def test_every_1d_two_layer_run_reports_its_gap(tmp_path):
    """Through the CLI: summary.json carries the gap (≥ 0 up to the solver's round-off: it is a bound from below
    on the minimum) and the CLI prints it; a deeper net has none."""
    p = cli("repcost-train", "train.phases.0.steps=300", "train.phases.1.steps=100", f"hydra.run.dir={tmp_path / 'a'}",
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert 0 <= s["certify.duality_gap_rel"] <= 1 and s["certify.dual_value"] <= s["objective"] * (1 + 1e-9)
    assert s["certify.duality_gap"] == pytest.approx(s["objective"] - s["certify.dual_value"], rel=1e-9, abs=1e-15)
    assert "global minimum: the objective is at most" in p.stdout + p.stderr
    p = cli("repcost-train", "model.depth=3", "train.phases.0.steps=5", "train.phases.1.steps=5",
            f"hydra.run.dir={tmp_path / 'b'}", cwd=tmp_path)
    assert p.returncode == 0 and "certify.duality_gap_rel" not in json.loads((tmp_path / "b" / "summary.json").read_text())


@pytest.mark.parametrize("rho", [1e-2, 5e-8])
def test_placing_the_convex_minimiser_reaches_the_independent_primal_and_closes_the_gap(rho):
    """place_convex_minimum (the exact solve's coefficients, as a net) against this file's lasso solve and
    against the solve's own dual value, down to the min-norm recipes' tiny ρ; the net's duality gap is ≈ 0."""
    x, y = _data(n=9, seed=2)
    xt, yt = torch.tensor(x)[:, None], torch.tensor(y)[:, None]
    spec = MODELS.get("linear_relu")
    net = spec.build(spec.schema(depth=2, width=2 * len(x)), 1, 1, torch.Generator().manual_seed(0)).double()
    assert place_convex_minimum(net, xt, yt, rho) > 0
    obj = float((((net(xt) - yt) ** 2).mean() + rho * net.param_sq_norm()).detach())
    if rho >= 1e-3:  # L-BFGS-B on this file's form stalls short of the minimum at the tiniest ρ
        assert obj == pytest.approx(_lasso(x, y, rho)[0], rel=1e-6)
    assert obj == pytest.approx(convex_minimum(x, y, rho).lower_bound, rel=1e-7)
    assert duality_gap(net, xt, yt, "mse", rho, "one")["duality_gap_rel"] < 1e-7
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
    assert cm.lower_bound <= cm.value * (1 + 1e-12)  # weak duality
    assert cm.value == pytest.approx(cm.lower_bound, rel=1e-7)
    w, b, a = cm.net.W[:, 0], cm.net.b, cm.net.a
    assert a.shape == (len(w), d) and len(w) <= 2 * n
    assert np.allclose(np.abs(w), np.linalg.norm(a, axis=1), rtol=1e-12)  # balanced
    # its objective, read off the balanced net's function and weights, is the value
    fit = np.maximum(np.outer(x, w) + b, 0) @ a + cm.net.c
    assert ((fit - y) ** 2).sum(axis=1).mean() + rho * ((a ** 2).sum() + (w ** 2).sum()) == pytest.approx(cm.value)
    if rho >= 1e-3 and d == 1:
        assert cm.value == pytest.approx(_lasso(x, y[:, 0], rho)[0], rel=1e-6)
    with pytest.raises(ValueError, match=f"at most {MAX_POINTS} points"):
        convex_minimum(np.linspace(0, 1, MAX_POINTS + 1), np.zeros(MAX_POINTS + 1), rho)


def _unit_data(n: int = 9, d_out: int = 2, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.sort(torch.rand(n, generator=g, dtype=F64) * 4 - 2).values
    return x, torch.randn(n, d_out, generator=g, dtype=F64)


def _h(x, r, c, s, eta, rho):
    """(1/N)‖r + φηᵀ‖² + 2ρ‖η‖ along the feature φ = [s(x − c)]₊."""
    phi = torch.relu(s * (x - c))
    return float(((r + phi[:, None] * eta[None, :]) ** 2).sum() / x.shape[0] + 2 * rho * eta.norm())


def _best(x, r, rho):
    """best_unit's (kink, side, η, violation); None without a gap."""
    out = best_unit(x, r, rho)
    if out is None:
        return None
    unit, violation = out
    w = float(unit.W[0, 0])  # 0 where the step is 0: no kink to read
    return -float(unit.b[0]) / w if w else None, int(np.sign(w)), torch.tensor(unit.a[0] * abs(w)), violation


def test_the_feature_is_the_brute_force_argmax_and_its_step_is_the_exact_minimiser():
    x, r = _unit_data()
    rho = 0.02
    kink, sign, eta, violation = _best(x, r, rho)
    scores = {}
    for lo, hi in zip(x[:-1].tolist(), x[1:].tolist()):  # an explicit loop over gaps and sides
        for s in (1, -1):
            phi = torch.tensor([max(0.0, s * (xi - (lo + hi) / 2)) for xi in x.tolist()], dtype=F64)
            scores[((lo + hi) / 2, s)] = 2 / len(x) * float((phi @ r).norm())
    (c, s), best = max(scores.items(), key=lambda kv: kv[1])
    assert kink == pytest.approx(c, abs=1e-15) and sign == s
    assert violation == pytest.approx(best / (2 * rho), rel=1e-12) and violation > 1
    h0 = _h(x, r, c, s, eta, rho)
    assert h0 < _h(x, r, c, s, 0 * eta, rho)  # a violated condition: the step lowers the objective
    g = torch.Generator().manual_seed(1)
    for eps in (1e-1, 1e-2, 1e-4):  # no nearby step is better: η is the minimiser, not just a descent
        for _ in range(50):
            d = torch.randn(2, generator=g, dtype=F64)
            assert _h(x, r, c, s, eta + eps * d, rho) >= h0 - 1e-14


def test_a_residual_that_is_one_feature_is_removed_in_one_step():
    x = torch.tensor([0.0, 1.0], dtype=F64)  # one gap, kink 0.5: φ₊ = (0, ½), φ₋ = (½, 0)
    r = torch.tensor([[0.0], [-1.5]], dtype=F64)  # r = −3φ₊
    kink, sign, eta, violation = _best(x, r, 0.0)
    assert kink == 0.5 and sign == 1 and violation == float("inf")
    assert float(eta[0]) == pytest.approx(3.0, rel=1e-12)  # f + 3φ₊ fits: the residual is gone
    # soft-thresholded: η = 3·(1 − ρN/|⟨φ₊, r⟩|) = 3·(1 − 0.2/0.75); the boundary (2/N)·0.75 = 2ρ at ρ = 0.375
    assert float(_best(x, r, 0.1)[2][0]) == pytest.approx(3 * (1 - 0.2 / 0.75), rel=1e-12)
    assert _best(x, r, 0.375)[3] == pytest.approx(1.0, rel=1e-12)
    assert _best(x, torch.zeros_like(r), 1e-3)[3] == 0.0
    assert _best(torch.ones(3, dtype=F64), torch.ones(3, 1, dtype=F64), 1e-3) is None  # no gap


def _net(width: int = 8, depth: int = 2, d_in: int = 1, live: int = 2):
    spec = MODELS.get("linear_relu")
    m = spec.build(spec.schema(depth=depth, width=width, kink_range=1.0), d_in, 1,
                   torch.Generator().manual_seed(3)).double()
    with torch.no_grad():
        m.a[:, live:] = 0  # units live … width−1 are idle (weight decay's leftovers are ~0, these exactly 0)
    return m


def test_insertion_places_the_features_balanced_and_lowers_the_objective_each_time():
    x, y = _unit_data(n=10, d_out=1, seed=4)
    x = x[:, None]
    m, rho = _net(), 1e-3
    obj = lambda: float((((m(x) - y) ** 2).sum() / len(y) + rho * m.param_sq_norm()).detach())  # noqa: E731
    live_before = [p.detach().clone() for p in (m.linear[0][:2], m.b[:2], m.a[:, :2])]
    grid = torch.linspace(-3, 3, 601, dtype=F64)[:, None]
    f_before, o_before = m(grid).detach(), obj()
    feats = insert_units(m, x, y, 3, rho)
    assert len(feats) == 3 and obj() < o_before
    # the net changed by exactly Σ η_k φ_k: the model's forward pass against the features' formula
    expect = f_before + sum(torch.tensor(unit(grid.numpy())) for unit, _ in feats)
    assert torch.allclose(m(grid).detach(), expect, atol=1e-12)
    w, a = m.linear[0][:, 0].detach(), m.a[0].detach()
    new = (a != 0).nonzero()[:, 0].tolist()[2:]
    assert len(new) == 3 and torch.allclose(w[new].abs(), a[new].abs(), rtol=1e-12)  # balanced units
    assert all(torch.equal(p, q) for p, q in zip(live_before, (m.linear[0][:2], m.b[:2], m.a[:, :2])))
    # greedily, one at a time: every further unit lowers the objective again
    m2 = _net()
    obj2 = lambda: float((((m2(x) - y) ** 2).sum() / len(y) + rho * m2.param_sq_norm()).detach())  # noqa: E731
    objs = [obj2()]
    for _ in range(3):
        insert_units(m2, x, y, 1, rho)
        objs.append(obj2())
    assert all(b < a for a, b in zip(objs, objs[1:]))


def test_nothing_is_inserted_where_no_feature_helps_and_other_nets_are_refused():
    x, _ = _unit_data(n=6, d_out=1)
    x = x[:, None]
    m = _net()
    y = m(x).detach()  # a perfect fit: no residual, no violated condition
    before = [p.detach().clone() for p in m.parameters()]
    assert insert_units(m, x, y, 4, 1e-3) == []
    assert all(torch.equal(p, q) for p, q in zip(before, m.parameters()))
    with pytest.raises(ValueError, match="depth 2 and 1-D inputs"):
        insert_units(_net(depth=3), x, y, 1, 1e-3)
    with pytest.raises(ValueError, match="depth 2 and 1-D inputs"):
        insert_units(_net(d_in=2), torch.zeros(6, 2, dtype=F64), y, 1, 1e-3)
    spec = MODELS.get("fc")
    fc = spec.build(spec.schema(depth=2, width=4), 1, 1, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="free biases"):
        insert_units(fc, x, y, 1, 1e-3)


# a first phase at 100·λ = 0.1 prunes most units, the second (lr 1e-12: it cannot move) starts with insertion
PRUNE_THEN_INSERT = ("model=linear_relu", "model.width=30", "model.kinks_over_data=true", "data=points_1d",
                     "data.n_points=8", "train=adam_gd", "train.lam=1e-3", "train.phases.0.steps=400",
                     "train.phases.0.lr=2e-2", "+train.phases.0.lam_factor=100", "train.phases.1.steps=1",
                     "train.phases.1.lr=1e-12", "train.log_every=100", "seed=2")


@pytest.mark.slow  # an end-to-end CLI run of several seconds
def test_insertion_through_the_engine_lowers_the_phase_objective_and_members_match_single_runs(tmp_path):
    plain, _ = train_direct(tmp_path, *PRUNE_THEN_INSERT, name="plain")
    ins, _ = train_direct(tmp_path, *PRUNE_THEN_INSERT, "+train.phases.1.insert_units=6", name="ins")
    assert ins["objective"] < 0.9 * plain["objective"] and ins["train_loss"] < plain["train_loss"]
    top, ens = train_direct(tmp_path, *PRUNE_THEN_INSERT, "+train.phases.1.insert_units=6", "train.ensemble_size=2",
                     name="ens")
    for i in range(2):
        args = [a for a in PRUNE_THEN_INSERT if a != "seed=2"]
        single, sdir = train_direct(tmp_path, *args, "+train.phases.1.insert_units=6", f"seed={2 + i}", name=f"s{i}")
        assert_member_matches_single(ens, i, single, sdir)


@pytest.mark.slow
def test_insert_units_bad_values_are_one_line_errors(tmp_path):
    for args, needle in [(("+train.phases.0.insert_units=-1",), "train.phases.0.insert_units"),
                         (("+train.phases.0.insert_units=2", "model=fc", "data=teacher"),
                          "insert_units=2: needs depth 2 and 1-D inputs"),
                         (("+train.phases.0.insert_units=2", "model.depth=3"), "depth 2 and 1-D inputs"),
                         (("+train.phases.0.insert_units=2", "train.loss=cross_entropy", "data=mnist"),
                          "insert_units")]:
        p = cli("repcost-train", *args, "train.phases.0.steps=2", f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
        msg = (p.stdout + p.stderr).strip()
        assert p.returncode == 2 and needle in msg and "Traceback" not in msg, (args, msg)


@pytest.mark.slow
def test_insert_units_is_part_of_the_run_identity(tmp_path):
    base = ("model=linear_relu", "data=points_1d", "train.phases.0.steps=5")
    cli("repcost-train", *base, f"hydra.run.dir={tmp_path / 'a'}", cwd=tmp_path)
    cli("repcost-train", *base, "+train.phases.0.insert_units=3", f"hydra.run.dir={tmp_path / 'b'}", cwd=tmp_path)
    ids = [json.loads((tmp_path / d / "summary.json").read_text()).get("config_hash") for d in "ab"]
    assert ids[0] is not None and ids[0] != ids[1]


def test_an_idle_unit_that_adds_a_constant_is_re_placed_without_raising_the_objective():
    """A unit with tiny path mass but its kink beyond the data adds a_k·[b_k]₊ to every prediction: zeroing it would
    shift the fit. Its constant moves into the output bias, and no insertion ever raises the objective."""
    x, y = _unit_data(d_out=1)
    spec = MODELS.get("linear_relu")
    net = spec.build(spec.schema(depth=2, width=8), 1, 1, torch.Generator().manual_seed(0)).double()
    rho = 1e-3
    with torch.no_grad():
        net.linear[0][0, 0], net.b[0], net.a[0, 0] = 1e-6, 5.0, 2.0  # path mass 2e-6, constant 10 on the data
        net.c[0] = float(y.mean()) - 10.0  # the constant is part of the fit
    xt = x[:, None]
    objective = lambda: float(((net(xt) - y) ** 2).mean() + rho * net.param_sq_norm())  # noqa: E731
    with torch.no_grad():
        before, f_before = objective(), net(xt).clone()
        feats = insert_units(net, xt, y, 4, rho)
        after = objective()
    assert after <= before
    if not feats:  # nothing lowered the objective: the net is exactly as it was
        assert torch.equal(net(xt), f_before)
    # the constant is kept: predictions move only by the inserted features, not by 10
    assert float((net(xt) - f_before).abs().max()) < 5.0
