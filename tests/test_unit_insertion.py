"""Unit insertion (analysis/unit_features.py, analysis.units.insert_units, train.phases[*].insert_units): the new unit
is the gap feature of largest MSE gradient, with the exact group-lasso step, placed in the net as that feature."""

from __future__ import annotations

import json

import pytest
import torch

from repcost.analysis.units import insert_units

from conftest import cli
from repcost.analysis.unit_features import best_unit_feature
from repcost.models import MODELS
from test_ensemble import assert_member_matches_single, train

F64 = torch.float64


def _data(n: int = 9, d_out: int = 2, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.sort(torch.rand(n, generator=g, dtype=F64) * 4 - 2).values
    return x, torch.randn(n, d_out, generator=g, dtype=F64)


def _h(x, r, c, s, eta, rho):
    """(1/N)‖r + φηᵀ‖² + 2ρ‖η‖ along the feature φ = [s(x − c)]₊."""
    phi = torch.relu(s * (x - c))
    return float(((r + phi[:, None] * eta[None, :]) ** 2).sum() / x.shape[0] + 2 * rho * eta.norm())


def test_the_feature_is_the_brute_force_argmax_and_its_step_is_the_exact_minimiser():
    x, r = _data()
    rho = 0.02
    feat = best_unit_feature(x, r, rho)
    scores = {}
    for lo, hi in zip(x[:-1].tolist(), x[1:].tolist()):  # an explicit loop over gaps and sides
        for s in (1, -1):
            phi = torch.tensor([max(0.0, s * (xi - (lo + hi) / 2)) for xi in x.tolist()], dtype=F64)
            scores[((lo + hi) / 2, s)] = 2 / len(x) * float((phi @ r).norm())
    (c, s), best = max(scores.items(), key=lambda kv: kv[1])
    assert feat.kink == pytest.approx(c, abs=1e-15) and feat.sign == s
    assert feat.violation == pytest.approx(best / (2 * rho), rel=1e-12) and feat.violation > 1
    h0 = _h(x, r, c, s, feat.eta, rho)
    assert h0 < _h(x, r, c, s, 0 * feat.eta, rho)  # a violated condition: the step lowers the objective
    g = torch.Generator().manual_seed(1)
    for eps in (1e-1, 1e-2, 1e-4):  # no nearby step is better: η is the minimiser, not just a descent
        for _ in range(50):
            d = torch.randn(2, generator=g, dtype=F64)
            assert _h(x, r, c, s, feat.eta + eps * d, rho) >= h0 - 1e-14


def test_a_residual_that_is_one_feature_is_removed_in_one_step():
    x = torch.tensor([0.0, 1.0], dtype=F64)  # one gap, kink 0.5: φ₊ = (0, ½), φ₋ = (½, 0)
    r = torch.tensor([[0.0], [-1.5]], dtype=F64)  # r = −3φ₊
    feat = best_unit_feature(x, r, 0.0)
    assert feat.kink == 0.5 and feat.sign == 1 and feat.violation == float("inf")
    assert float(feat.eta[0]) == pytest.approx(3.0, rel=1e-12)  # f + 3φ₊ fits: the residual is gone
    # soft-thresholded: η = 3·(1 − ρN/|⟨φ₊, r⟩|) = 3·(1 − 0.2/0.75); the boundary (2/N)·0.75 = 2ρ at ρ = 0.375
    assert float(best_unit_feature(x, r, 0.1).eta[0]) == pytest.approx(3 * (1 - 0.2 / 0.75), rel=1e-12)
    assert best_unit_feature(x, r, 0.375).violation == pytest.approx(1.0, rel=1e-12)
    assert best_unit_feature(x, torch.zeros_like(r), 1e-3).violation == 0.0
    assert best_unit_feature(torch.ones(3, dtype=F64), torch.ones(3, 1, dtype=F64), 1e-3) is None  # no gap


def _net(width: int = 8, depth: int = 2, d_in: int = 1, live: int = 2):
    spec = MODELS.get("linear_relu")
    m = spec.build(spec.schema(depth=depth, width=width, kink_range=1.0), d_in, 1,
                   torch.Generator().manual_seed(3)).double()
    with torch.no_grad():
        m.a[:, live:] = 0  # units live … width−1 are idle (weight decay's leftovers are ~0, these exactly 0)
    return m


def test_insertion_places_the_features_balanced_and_lowers_the_objective_each_time():
    x, y = _data(n=10, d_out=1, seed=4)
    x = x[:, None]
    m, rho = _net(), 1e-3
    obj = lambda: float((((m(x) - y) ** 2).sum() / len(y) + rho * m.param_sq_norm()).detach())  # noqa: E731
    live_before = [p.detach().clone() for p in (m.linear[0][:2], m.b[:2], m.a[:, :2])]
    grid = torch.linspace(-3, 3, 601, dtype=F64)[:, None]
    f_before, o_before = m(grid).detach(), obj()
    feats = insert_units(m, x, y, 3, rho)
    assert len(feats) == 3 and obj() < o_before
    # the net changed by exactly Σ η_k φ_k: the model's forward pass against the features' formula
    expect = f_before + sum(f.eta * torch.relu(f.sign * (grid - f.kink)) for f in feats)
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
    x, _ = _data(n=6, d_out=1)
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


def test_insertion_through_the_engine_lowers_the_phase_objective_and_members_match_single_runs(tmp_path):
    plain, _ = train(tmp_path, *PRUNE_THEN_INSERT, name="plain")
    ins, _ = train(tmp_path, *PRUNE_THEN_INSERT, "+train.phases.1.insert_units=6", name="ins")
    assert ins["objective"] < 0.9 * plain["objective"] and ins["train_loss"] < plain["train_loss"]
    top, ens = train(tmp_path, *PRUNE_THEN_INSERT, "+train.phases.1.insert_units=6", "train.ensemble_size=2",
                     name="ens")
    for i in range(2):
        args = [a for a in PRUNE_THEN_INSERT if a != "seed=2"]
        single, sdir = train(tmp_path, *args, "+train.phases.1.insert_units=6", f"seed={2 + i}", name=f"s{i}")
        assert_member_matches_single(ens, i, single, sdir)


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


def test_insert_units_is_part_of_the_run_identity(tmp_path):
    base = ("model=linear_relu", "data=points_1d", "train.phases.0.steps=5")
    cli("repcost-train", *base, f"hydra.run.dir={tmp_path / 'a'}", cwd=tmp_path)
    cli("repcost-train", *base, "+train.phases.0.insert_units=3", f"hydra.run.dir={tmp_path / 'b'}", cwd=tmp_path)
    ids = [json.loads((tmp_path / d / "summary.json").read_text()).get("config_hash") for d in "ab"]
    assert ids[0] is not None and ids[0] != ids[1]


def test_an_idle_unit_that_adds_a_constant_is_re_placed_without_raising_the_objective():
    """A unit with tiny path mass but its kink beyond the data adds a_k·[b_k]₊ to every prediction: zeroing it would
    shift the fit. Its constant moves into the output bias, and no insertion ever raises the objective."""
    x, y = _data(d_out=1)
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
