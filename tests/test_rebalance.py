"""Rebalancing (analysis.critical.rebalance, train.phases[*].rebalance): per-unit rescalings that keep the function,
to the least penalty on the orbit, where every unit is balanced (Jacot 2023 Remark 6)."""

from __future__ import annotations

import math

import pytest
import torch

from repcost.analysis.critical import rebalance
from omegaconf import OmegaConf

from repcost.config import compose_config, validate
from repcost.errors import RepcostError
from repcost.models import MODELS
from repcost.models.base import Structure
from repcost.train.run import train_run


def _model(family: str, d_in: int, **kw):
    spec = MODELS.get(family)
    m = spec.build(spec.schema(**kw), d_in, 1, torch.Generator().manual_seed(3)).double()
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():  # unbalance it: a random log-normal rescaling of every parameter entry
        for p in m.parameters():
            p.mul_(torch.exp(torch.randn(p.shape, generator=g, dtype=p.dtype)))
    return m


CASES = [("fc", 3, dict(depth=4, width=7)), ("fc", 2, dict(depth=3, width=5, bias_regularised=False)),
         ("fc", 2, dict(depth=3, width=5, slope=0.2)), ("linear_relu", 1, dict(depth=2, width=9, kink_range=1.0)),
         ("linear_relu", 2, dict(depth=3, width=6)), ("parallel", 1, dict(depth=4, n_subnets=3, width=4)),
         ("parallel", 2, dict(depth=2, n_subnets=5, width=1))]


@pytest.mark.parametrize("family,d_in,kw", CASES)
def test_rebalance_keeps_the_function_and_balances_every_unit(family, d_in, kw):
    m = _model(family, d_in, **kw)
    x = torch.randn(40, d_in, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    y0, sq0 = m(x).detach(), float(m.param_sq_norm().detach())
    before, after = rebalance(m)
    assert before > 0.1 and after < 1e-9
    assert torch.allclose(m(x), y0, rtol=1e-10, atol=1e-12)
    assert float(m.param_sq_norm().detach()) < sq0
    for u in m.unit_norms():
        assert torch.allclose(u.incoming, u.outgoing, rtol=1e-8, atol=1e-300)


def test_two_layer_rebalance_reaches_the_path_norm():
    """With free biases, min over rescalings of Σ_k (|a_k|² + ‖w_k‖²) is 2Σ_k |a_k|·‖w_k‖ (AM-GM): the orbit's
    minimum is the path norm (Ongie & Willett eq. 13), computed here from the weights before rebalancing."""
    m = _model("linear_relu", 3, depth=2, width=11)
    path = float((m.a.detach().abs()[0] * m.linear[0].detach().norm(dim=1)).sum())
    rebalance(m)
    assert math.isclose(float(m.param_sq_norm()), 2 * path, rel_tol=1e-12)


def test_a_family_with_its_own_unit_norms_needs_its_own_rescaling():
    from repcost.models.fc import FC

    class Odd(FC):  # unit norms of its own, no rescaling to match: refuse rather than rescale wrongly
        def unit_norms(self):
            return super().unit_norms()[:1]

    m = _model("fc", 2, depth=3, width=4)
    m.__class__ = Odd
    with pytest.raises(NotImplementedError, match="rescale_units"):
        rebalance(m)


def _gd_args(*extra: str) -> list[str]:
    return ["train.progress=false", "model=fc", "model.depth=3", "model.width=6", "data=teacher", "data.n_train=30",
            "data.n_test=0", "data.widths=[4,3]", "train.lam=1e-3", "train=adam_gd", "dtype=float64", *extra]


def _run(tmp_path, name: str, *extra: str) -> dict:
    cfg = compose_config(_gd_args(*extra))
    return train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / name)


@pytest.mark.slow  # several seconds of process starts and training
def test_a_rebalanced_phase_ends_balanced_where_plain_gd_does_not(tmp_path):
    """Adam leaves the units unbalanced and GD at a small λ·lr barely moves them; rebalancing before the GD
    phase starts it at the balanced point, which GD keeps (its drift off balance is O(lr²) per step)."""
    phases = ["train.phases.0.steps=1500", "train.phases.0.lr=1e-2", "train.phases.1.steps=300",
              "train.phases.1.lr=1e-3"]
    plain = _run(tmp_path, "plain", *phases)
    reb = _run(tmp_path, "reb", *phases, "+train.phases.1.rebalance=true")
    assert plain["critical.unit_gap"] > 0.05
    assert reb["critical.unit_gap"] < 1e-3
    assert reb["objective"] < plain["objective"]


def test_rebalance_on_a_family_without_homogeneity_is_a_one_line_error(tmp_path, monkeypatch):
    from repcost.models.fc import FC

    no_homogeneity = Structure(layer_rescaling=True, unit_rescaling=True, positively_homogeneous=False)
    monkeypatch.setattr(FC, "structure", property(lambda self: no_homogeneity, lambda self, value: None))  # FC's ignored
    with pytest.raises(RepcostError, match="rebalance=true: rebalancing needs a per-unit rescaling symmetry and a positively homogeneous"):
        _run(tmp_path, "x", "train.phases.0.steps=5", "train.phases.1.steps=5", "+train.phases.1.rebalance=true")


@pytest.mark.parametrize("family,d_in,kw", [("fc", 2, dict(depth=3, width=5, bias_regularised=False)),
                                            ("parallel", 1, dict(depth=4, n_subnets=3, width=4))])
def test_units_weight_decay_killed_are_left_alone(family, d_in, kw):
    """A unit whose incoming weights decayed to ~1e-160 would need c = (out/in)^¼ ~ 1e80 (a free bias blown
    up, or an overflow to inf further on): rebalancing leaves such a unit as it is and balances the rest."""
    m = _model(family, d_in, **kw)
    W = m.weight_matrices()[0]
    with torch.no_grad():
        W[0].mul_(1e-160)  # fc: unit 0 of layer 1; parallel: sub-network 0's first layer
        if family == "fc":
            m.biases[0][0] = 0.5  # a free bias that c would scale up
    x = torch.randn(30, d_in, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    y0 = m(x).detach()
    rebalance(m)
    assert all(bool(torch.isfinite(p).all()) for p in m.parameters())
    assert max(float(p.detach().abs().max()) for p in m.parameters()) < 1e6
    assert torch.allclose(m(x), y0, rtol=1e-10, atol=1e-12)
