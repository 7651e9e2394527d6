"""The polish (train/polish.py): dead units removed exactly, the objective never raised, a Clarke-stationary point reached
where data sit on kinks; and what the Clarke measure's set is (analysis/clarke.py `clarke_gradient_norm`)."""

from __future__ import annotations

import copy
import json
import math
import time

import pytest
import torch

from repcost.analysis.clarke import clarke_gradient_norm
from repcost.analysis.critical import critical_point_certificate
from repcost.config.schema import PhaseConfig
from repcost.models import MODELS
from repcost.objective import objective
from helpers import stored_net, train

from repcost.train import polish as polish_module
from repcost.train.polish import WIDTHS, polish, remove_dead_units

LAM = 1e-2
TOL = PhaseConfig.polish_tol  # the phase's default


def _fc(depth: int, width: int, d_in: int, d_out: int, seed: int = 0):
    spec = MODELS.get("fc")
    return spec.build(spec.schema(depth=depth, width=width), d_in, d_out, torch.Generator().manual_seed(seed)).double()


def _data(n: int, d_in: int, d_out: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d_in, generator=g, dtype=torch.float64), torch.randn(n, d_out, generator=g, dtype=torch.float64)


def test_dead_units_removed_exactly():
    """A unit inactive on every data point and a unit with no outgoing weight are set to 0 with all they own; the
    network's outputs on the data are unchanged and the penalty drops by exactly their squared norms."""
    m = _fc(3, 6, 3, 2)
    x, _ = _data(10, 3, 2)
    with torch.no_grad():
        m.biases[0][1] = -100.0  # layer-1 unit 1: z < 0 on every point
        m.weights[2][:, 4] = 0.0  # layer-2 unit 4: no outgoing weight
        out0, sq0 = m(x), float(m.param_sq_norm())
        own = float(m.weights[0][1].square().sum() + m.biases[0][1] ** 2 + m.weights[1][:, 1].square().sum()
                    + m.weights[1][4].square().sum() + m.biases[1][4] ** 2 + m.weights[2][:, 4].square().sum()
                    - m.weights[1][4, 1] ** 2)  # the entry both units own, counted once
    removed, frozen = remove_dead_units(m, x)
    assert removed == 2
    with torch.no_grad():
        assert torch.equal(m(x), out0)
        assert abs((sq0 - float(m.param_sq_norm())) - own) <= 1e-12 * sq0
    assert all(bool((p[f] == 0).all()) for p, f in zip(m.parameters(), frozen))
    assert sum(int(f.sum()) for f in frozen) == (3 + 1 + 6) + (6 + 1 + 2) - 1


def test_polish_never_raises_the_objective_and_keeps_removed_units_at_zero():
    m = _fc(3, 8, 3, 2, seed=3)
    x, y = _data(12, 3, 2)
    with torch.no_grad():
        m.biases[0][0] = -100.0
    with torch.no_grad():
        start = float(objective(m, x, y, "mse", LAM, "one")[0])
    r = polish(m, x, y, "mse", LAM, "one", 50, math.inf, TOL)
    with torch.no_grad():
        end = float(objective(m, x, y, "mse", LAM, "one")[0])
    assert r.removed >= 1 and r.objective_start == start and abs(r.objective_end - end) <= 1e-12 * end
    assert end < start
    assert not m.weights[0][0].detach().any() and not m.weights[1][:, 0].detach().any()


def test_polish_writes_through_parameters_that_are_views_into_a_stack():
    """In an ensemble a member's parameters are views of one slice of the stacked tensors the optimiser steps: the
    polished values must land there, not in new tensors the stack never sees."""
    m = _fc(3, 8, 3, 2, seed=3)
    x, y = _data(12, 3, 2)
    stack = {k: torch.stack([p.detach(), p.detach() + 1.0]) for k, p in m.named_parameters()}
    for k, p in m.named_parameters():
        p.data = stack[k][0]
    before = {k: v[0].clone() for k, v in stack.items()}
    r = polish(m, x, y, "mse", LAM, "one", 50, math.inf, TOL)
    assert r.objective_end < r.objective_start
    for k, p in m.named_parameters():
        assert p.data_ptr() == stack[k][0].data_ptr() and torch.equal(p.detach(), stack[k][0])
    assert any(not torch.equal(stack[k][0], before[k]) for k in stack)


def _trained_then_plain_lbfgs(m, x, y, reg_scale: str, adam_steps: int) -> dict:
    """`m` trained by full-batch Adam in place; the certificate of a copy then taken by dead-unit removal and 1 000
    plain float64 L-BFGS iterations (torch.optim.LBFGS with strong Wolfe, the obvious tool: what the polish must beat)."""
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    for _ in range(adam_steps):
        opt.zero_grad()
        objective(m, x, y, "mse", LAM, reg_scale)[0].backward()
        opt.step()
    plain = copy.deepcopy(m)
    remove_dead_units(plain, x)
    lbfgs = torch.optim.LBFGS([p for p in plain.parameters() if p.requires_grad], max_iter=1000, history_size=100,
                              line_search_fn="strong_wolfe", tolerance_grad=0.0, tolerance_change=1e-16)

    def closure() -> torch.Tensor:
        lbfgs.zero_grad()
        obj = objective(plain, x, y, "mse", LAM, reg_scale)[0]
        obj.backward()
        return obj
    lbfgs.step(closure)
    return critical_point_certificate(plain, x, y, "mse", LAM, reg_scale)


@pytest.mark.slow
def test_polish_reaches_a_clarke_stationary_point_where_plain_lbfgs_stalls_on_a_kink():
    """y(0) = −0.1 lies below what the data around it ask for: the minimum puts a unit's kink exactly on x = 0 (moving it
    either way costs at first order). Plain float64 L-BFGS from the trained net stalls there; the polish reaches the
    critical point. Two computations agree: the polish's own measure (one element of the chain-rule set, at its
    multipliers' slopes) bounds the certificate's least norm over the set (BVLS), which is the Clarke subdifferential
    here (one kinked layer)."""
    spec = MODELS.get("fc")
    m = spec.build(spec.schema(depth=2, width=8), 1, 1, torch.Generator().manual_seed(0)).double()
    x = torch.tensor([[-1.0], [0.0], [1.0], [2.0]], dtype=torch.float64)
    y = torch.tensor([[0.0], [-0.1], [1.0], [2.0]], dtype=torch.float64)
    stalled = _trained_then_plain_lbfgs(m, x, y, "half", adam_steps=3000)
    assert stalled["kinks"] >= 1 and stalled["clarke_stationarity"] > 0.1 and not stalled["critical_point"]
    r = polish(m, x, y, "mse", LAM, "half", 1000, math.inf, TOL)
    cert = critical_point_certificate(m, x, y, "mse", LAM, "half", stationarity_tol=1e-3)
    # the certificate's least norm (BVLS on the slopes' affine model) is exact to ~1e-7 of the penalty's pull
    assert r.clarke <= 1e-3 and cert["clarke_stationarity"] <= r.clarke * (1 + 1e-6) + 1e-7
    assert cert["kinks"] >= 1 and cert["clarke_exact"] is True and cert["critical_point"]
    assert cert["stationarity"] > 0.1  # the plain gradient does not vanish: the kink is part of the solution
    assert r.objective_end <= r.objective_start


def _kinked_two_layer():
    """A two-layer ReLU net on 1-D inputs with unit 0's kink exactly on the data point x = 0."""
    m = _fc(2, 3, 1, 1, seed=5)
    x = torch.tensor([[-1.0], [0.0], [0.5], [1.5]], dtype=torch.float64)
    y = torch.tensor([[0.2], [-0.1], [0.3], [0.0]], dtype=torch.float64)
    with torch.no_grad():
        m.weights[0].copy_(torch.tensor([[1.0], [0.7], [-0.6]]))
        m.biases[0].copy_(torch.tensor([0.0, 2.0, 2.0]))  # units 1, 2: no kink on the data
        m.weights[1].fill_(0.5)
    return m, x, y


def test_polish_rates_its_start_as_the_certificate_does():
    """With no iterations the polish returns its start, rated by the certificate's least norm over the kinks' slopes
    (not by the gradient at the slopes autograd takes, larger here): the measure it reports is the certificate's at the
    point it returns, so it never returns a point the certificate rates worse than its start."""
    m, x, _ = _kinked_two_layer()
    with torch.no_grad():  # residuals that a slope in (0, 1] at the kink partly balances
        y = m(x) + torch.tensor([[0.0], [0.4], [-0.2], [-0.2]], dtype=torch.float64)
    cert = critical_point_certificate(m, x, y, "mse", LAM, "one", stationarity_tol=1e-12)
    assert cert["kinks"] == 1 and cert["clarke_stationarity"] < 0.99 * cert["stationarity"]
    r = polish(m, x, y, "mse", LAM, "one", 0, math.inf, TOL)
    assert r.removed == 0 and r.objective_end == r.objective_start
    assert abs(r.clarke - cert["clarke_stationarity"]) <= 1e-9 * cert["clarke_stationarity"]


def test_a_start_within_the_tolerance_is_kept_and_one_above_it_is_polished():
    """`polish_tol` is where the polish stops: a start whose certificate measure is below it takes no iteration and
    keeps its parameters; the same start with a tolerance below its measure is polished."""
    m, x, _ = _kinked_two_layer()
    with torch.no_grad():
        y = m(x) + torch.tensor([[0.0], [0.4], [-0.2], [-0.2]], dtype=torch.float64)
    measure = critical_point_certificate(m, x, y, "mse", LAM, "one", stationarity_tol=1e-12)["clarke_stationarity"]
    kept, polished = copy.deepcopy(m), copy.deepcopy(m)
    r = polish(kept, x, y, "mse", LAM, "one", 50, math.inf, 2 * measure)
    assert r.iterations == 0 and all(torch.equal(p, q) for p, q in zip(kept.parameters(), m.parameters()))
    r = polish(polished, x, y, "mse", LAM, "one", 50, math.inf, measure / 2)
    assert r.iterations > 0 and r.objective_end < r.objective_start


def test_a_width_that_does_not_converge_leaves_the_later_stages_their_share_of_the_time(monkeypatch):
    """A smoothed problem that takes its whole deadline (a deep net's first width can take hours) must not take the
    whole budget: every width gets its turn within `seconds`, as the docstring promises."""
    deadlines = []

    def slow(params, value, iterations, deadline, at, tol=0.0) -> int:
        deadlines.append(deadline)
        time.sleep(max(0.0, deadline - time.perf_counter()))
        return 1
    monkeypatch.setattr(polish_module, "_descend", slow)
    m = _fc(3, 8, 3, 2, seed=3)
    x, y = _data(12, 3, 2)
    t0 = time.perf_counter()
    polish(m, x, y, "mse", LAM, "one", len(WIDTHS), 3.0, 0.0)  # one iteration a width, no active set
    assert len(deadlines) >= len(WIDTHS) and deadlines[len(WIDTHS) - 1] <= t0 + 3.0


def test_chain_rule_set_is_clarke_for_one_kinked_layer_with_independent_gradients():
    m, x, y = _kinked_two_layer()
    assert clarke_gradient_norm(m, x, y, "mse", LAM, "one")[2] is True


def test_chain_rule_set_is_only_an_outer_estimate_with_kinks_in_two_layers():
    """A kink in layer 2 reads layer 1's kinked unit: the kinked pre-activations are not smooth functions of θ."""
    spec = MODELS.get("fc")
    m = spec.build(spec.schema(depth=3, width=2), 1, 1, torch.Generator().manual_seed(0)).double()
    x = torch.tensor([[-1.0], [0.0], [2.0]], dtype=torch.float64)
    y = torch.tensor([[0.1], [0.2], [0.3]], dtype=torch.float64)
    with torch.no_grad():
        m.weights[0].copy_(torch.tensor([[1.0], [-1.0]]))
        m.biases[0].zero_()  # both layer-1 units kinked at x = 0
        m.weights[1].copy_(torch.tensor([[1.0, 1.0], [1.0, -1.0]]))
        m.biases[1].copy_(torch.tensor([0.0, 0.5]))  # layer-2 unit 0: z = |x|, kinked at x = 0
        m.weights[2].fill_(1.0)
    assert clarke_gradient_norm(m, x, y, "mse", LAM, "one")[2] is False


def test_no_kinks_nothing_to_say():
    m, x, y = _kinked_two_layer()
    with torch.no_grad():
        m.biases[0][0] = 0.25  # kink moved off the data
    assert clarke_gradient_norm(m, x, y, "mse", LAM, "one")[2] is None


@pytest.mark.slow
def test_polish_reaches_a_critical_point_of_a_deep_net_where_plain_lbfgs_stalls():
    """A depth-3 linear_relu net after a short Adam run: plain float64 L-BFGS stalls at a kink (Clarke measure above
    0.1); the polish's Newton steps leave it and reach a point the certificate calls critical at 10⁻⁶ (no kink left,
    so its measure is the plain gradient's), the polish's own measure agreeing, at a lower objective."""
    spec = MODELS.get("linear_relu")
    m = spec.build(spec.schema(depth=3, width=6), 2, 1, torch.Generator().manual_seed(2)).double()
    x, y = _data(5, 2, 1, seed=12)
    stalled = _trained_then_plain_lbfgs(m, x, y, "per_depth", adam_steps=1000)
    assert stalled["kinks"] >= 1 and stalled["clarke_stationarity"] > 0.1
    r = polish(m, x, y, "mse", LAM, "per_depth", 100, math.inf, TOL)
    cert = critical_point_certificate(m, x, y, "mse", LAM, "per_depth", stationarity_tol=1e-6)
    assert cert["critical_point"] and cert["stationarity"] <= r.clarke * (1 + 1e-6) <= 1e-6
    assert r.objective_end < r.objective_start


@pytest.mark.slow
def test_polish_leaves_a_kink_a_trained_two_rays_net_sits_on():
    """The two-rays recipe's net at L = 2 on held-out dataset 246 at the end of training (its best restart, stored):
    one live unit's kink sits on a data point with no slope in [0, 1] that makes the gradient vanish (not critical).
    The polish takes that kink off and reaches a critical point below the start; the certificate's least norm over
    its set agrees."""
    m, x, y = stored_net("two_rays_246.json", "linear_relu", 2, 1, depth=2, width=50)
    before = critical_point_certificate(m, x, y, "mse", 1e-4, "per_depth")
    assert before["kinks"] >= 1 and before["clarke_stationarity"] > 1e-3 and not before["critical_point"]
    r = polish(m, x, y, "mse", 1e-4, "per_depth", 2000, math.inf, TOL)
    after = critical_point_certificate(m, x, y, "mse", 1e-4, "per_depth", stationarity_tol=1e-6)
    assert after["critical_point"] and after["clarke_stationarity"] <= r.clarke * (1 + 1e-6) <= 1e-6
    assert r.objective_end < r.objective_start


@pytest.mark.slow
def test_polish_crosses_the_kinks_between_a_depth_3_two_rays_net_and_a_critical_point():
    """The two-rays recipe's net at L = 3 on held-out dataset 257 at the end of training (its best restart, stored):
    off a critical point, and the nearest one lies across kinks that an active set holding them one at a time
    reaches only after hundreds of solves. The smoothing continuation crosses them; the polish reaches a critical
    point below its start within 2 000 iterations, and the certificate's least norm agrees with its measure."""
    m, x, y = stored_net("two_rays_L3_257.json", "linear_relu", 2, 1, depth=3, width=50)
    before = critical_point_certificate(m, x, y, "mse", 1e-4, "per_depth")
    assert before["clarke_stationarity"] > 1e-2 and not before["critical_point"]
    r = polish(m, x, y, "mse", 1e-4, "per_depth", 2000, math.inf, TOL)
    after = critical_point_certificate(m, x, y, "mse", 1e-4, "per_depth", stationarity_tol=1e-6)
    measure = after.get("clarke_stationarity", after["stationarity"])
    assert after["critical_point"] and measure <= r.clarke * (1 + 1e-6) <= 1e-6
    assert r.objective_end < r.objective_start


@pytest.mark.slow
def test_a_last_phase_of_no_steps_polishes_where_training_ended(tmp_path):
    """Through the CLI: the two-rays recipe cut short ends off a critical point; the same run with a last phase of
    `steps: 0` and `polish` ends at one the certificate accepts, at no higher objective."""
    short = "{optimizer:adam,lr:1.0e-2,steps:300,lam_factor:10.0}"
    runs = {}
    for name, phases in (("trained", f"[{short},{{optimizer:adam,steps:0}}]"),
                         ("polished", f"[{short},{{optimizer:adam,steps:0,polish:5000,polish_tol:1.0e-3}}]")):
        code, _, err = train(["experiment=min_norm_two_rays", "train.ensemble_size=1", f"train.phases={phases}",
                              "train.progress=false", f"hydra.run.dir={tmp_path / name}"], tmp_path)
        assert code == 0, err
        runs[name] = json.loads((tmp_path / name / "summary.json").read_text())
    assert not runs["trained"]["critical_point"] and runs["polished"]["critical_point"]
    assert runs["polished"]["objective"] <= runs["trained"]["objective"]


@pytest.mark.slow
def test_the_jacot22_fig1_quick_preset_ends_at_a_critical_point(tmp_path):
    """Through the CLI: `jacot22-fig1-quick` seed 0 trained alone ends off a critical point (its forces do not balance:
    GD merges aligned units only slowly); its last phase merges the aligned groups and polishes (inputs in the data's
    42-dim span of 784), and the certificate accepts the end, below the trained objective."""
    runs = {}
    trained = "train.phases=[{optimizer:gd,lr:0.2,steps:2500,lam_factor:10},{optimizer:gd,lr:0.2,steps:2500}]"
    for name, extra in (("trained", [trained]), ("polished", [])):
        code, _, err = train(["experiment=jacot22-fig1-quick", "seed=0", "train.progress=false", *extra,
                              f"hydra.run.dir={tmp_path / name}"], tmp_path)
        assert code == 0, err
        runs[name] = json.loads((tmp_path / name / "summary.json").read_text())
    assert not runs["trained"]["critical_point"] and runs["polished"]["critical_point"]
    assert runs["polished"]["critical.clarke_stationarity"] <= 1e-6
    assert runs["polished"]["objective"] < runs["trained"]["objective"]
