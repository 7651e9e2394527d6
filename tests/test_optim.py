"""train.optim.Optimizer against torch.optim, and stacked grids (members differing in λ, lr, init scale)."""

from __future__ import annotations

import math

import pytest
import torch

from repcost.config import compose_config, validate
from repcost.data import load_data
from repcost.errors import RepcostError
from repcost.models import build_model
from repcost.train.engine import Engine
from repcost.train.optim import Optimizer, lr_factor


def make_optimizer(name: str, params, lr: float, momentum: float) -> torch.optim.Optimizer:
    """torch.optim's SGD (gd/sgd) or Adam with its defaults: the independent reference."""
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.SGD(params, lr=lr, momentum=momentum)


@pytest.mark.parametrize("name,momentum", [("gd", 0.0), ("sgd", 0.9), ("adam", 0.0)])
def test_optimizer_matches_torch_optim(name, momentum):
    """The same 30 steps on a random quadratic-plus-quartic loss: ours and torch.optim agree to float64 round-off."""
    g = torch.Generator().manual_seed(3)
    A = torch.randn(6, 6, generator=g, dtype=torch.float64)
    p0 = [torch.randn(6, 4, generator=g, dtype=torch.float64), torch.randn(4, generator=g, dtype=torch.float64)]

    def loss(ps):
        return ((A @ ps[0]) ** 2).sum() + (ps[1] ** 4).sum() + (ps[0].sum(0) * ps[1]).sum()

    ours = [t.clone().requires_grad_() for t in p0]
    ref = [t.clone().requires_grad_() for t in p0]
    opt = Optimizer(name, ours, momentum)
    topt = make_optimizer(name, ref, 0.01, momentum)
    for step in range(30):
        lr = 0.01 * (1 - step / 60)
        opt.lr.fill_(lr)
        for gr in topt.param_groups:
            gr["lr"] = lr
        for ps in (ours, ref):
            for p in ps:
                p.grad = None
            loss(ps).backward()
        opt.step()
        topt.step()
    for a, b in zip(ours, ref):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-14)
    # the state dict has torch.optim's layout: ours loads into torch.optim and continues identically
    topt2 = make_optimizer(name, [t.detach().clone().requires_grad_() for t in ours], 0.01, momentum)
    topt2.load_state_dict(opt.member_state_dict(0))
    for k, v in topt.state_dict()["state"].items():
        for key, t in v.items():
            if torch.is_tensor(t):
                assert torch.allclose(topt2.state_dict()["state"][k][key].double(), t.double(), rtol=1e-12), key


def test_stacked_optimizer_member_state_is_its_single_state():
    """Member i's slice of a stacked Adam, with its own lr, is a single Adam run with that lr."""
    g = torch.Generator().manual_seed(0)
    W = torch.randn(3, 5, 2, generator=g, dtype=torch.float64)
    stacked = W.clone().requires_grad_()
    lrs = torch.tensor([0.1, 0.01, 0.03], dtype=torch.float64)
    opt = Optimizer("adam", [stacked], K=3)
    singles = [W[i].clone().requires_grad_() for i in range(3)]
    sopts = [Optimizer("adam", [s]) for s in singles]
    for _ in range(20):
        stacked.grad = None
        (stacked ** 3).sum().backward()
        opt.lr.copy_(lrs)
        opt.step()
        for i, (s, o) in enumerate(zip(singles, sopts)):
            s.grad = None
            (s ** 3).sum().backward()
            o.lr.fill_(float(lrs[i]))
            o.step()
    for i in range(3):
        assert torch.equal(stacked.detach()[i], singles[i].detach())  # bitwise: the same elementwise ops
        a, b = opt.member_state_dict(i), sopts[i].member_state_dict(0)
        assert torch.equal(a["state"][0]["exp_avg_sq"], b["state"][0]["exp_avg_sq"])
        assert a["param_groups"][0]["lr"] == b["param_groups"][0]["lr"]


def _spec(*overrides):
    cfg = compose_config(["train.progress=false", "dtype=float64", *overrides])
    return validate(cfg)


GRID = [  # (seed, λ, lr of phase 0, lr of phase 1, init_scale): a λ × lr × seed × init-scale grid
    (0, 1e-3, 0.05, 0.02, 1.0), (1, 1e-2, 0.05, 0.02, 1.0), (0, 1e-3, 0.02, 0.01, 0.5), (2, 3e-3, 0.1, 0.05, 1.5),
]
BASE = ["model=fc", "model.depth=3", "model.width=8", "data=teacher", "data.n_train=24", "data.n_test=8",
        "train.phases=[{optimizer:adam,lr:0.05,steps:40},{optimizer:gd,lr:0.02,steps:40,schedule:cosine}]",
        "train.check_every=5"]


def _member_spec(seed, lam, lr0, lr1, scale, extra=()):
    return _spec(*BASE, f"seed={seed}", f"train.lam={lam}", f"train.phases.0.lr={lr0}", f"train.phases.1.lr={lr1}",
                 f"model.init_scale={scale}", *extra)


@pytest.mark.parametrize("extra", [(), ("train.grad_tol=1e-3", "train.plateau_window=30")])
def test_stacked_grid_members_equal_their_single_runs(extra):
    """Members differing in seed, λ, lr and init_scale, stacked, give their single runs to 1e-12 (float64)."""
    specs = [_member_spec(*row, extra=extra) for row in GRID]
    data = load_data(specs[0].data).to(torch.float64, torch.device("cpu"))
    singles = []
    for sp in specs:
        m = build_model(sp.model, data.d_in, data.d_out, sp.seed).double()
        r = Engine([m], data, [sp.train], [sp.seed]).run()[0]
        singles.append((m, r))
    models = [build_model(sp.model, data.d_in, data.d_out, sp.seed).double() for sp in specs]
    ens = Engine(models, data, [sp.train for sp in specs], [sp.seed for sp in specs])
    results = ens.run()
    for (m1, r1), m2, r2 in zip(singles, models, results):
        assert (r1.stop_reason, r1.steps) == (r2.stop_reason, r2.steps)
        for a, b in zip(m1.parameters(), m2.parameters()):
            rel = float((a - b).norm() / b.norm())  # ‖Δ‖/‖θ‖: single elements near 0 carry round-off alone
            assert rel <= 1e-12, rel
    assert len({float(m.param_sq_norm()) for m in models}) == len(models)  # the members really differ


def test_unstackable_runs_are_refused(tmp_path):
    """Runs that differ in more than the stackable keys never share an engine: refused before a directory opens."""
    from omegaconf import OmegaConf

    from repcost.train.run import train_runs

    cfgs = [compose_config(["train.progress=false", "dtype=float64", *BASE, f"seed={i}", *extra])
            for i, extra in enumerate([(), ("train.phases.1.steps=41",)])]
    with pytest.raises(RepcostError, match="run 1 cannot be stacked with run 0: its train.phases.1.steps differs"):
        train_runs([validate(c) for c in cfgs], [OmegaConf.to_container(c, resolve=True) for c in cfgs],
                   [tmp_path / "a", tmp_path / "b"])
    assert not (tmp_path / "a").exists()


def test_lr_schedule_factor_is_shared():
    """Every schedule is a factor in [final ratio, 1], from 1 at the first step to the final ratio at the last."""
    for sched in ("constant", "cosine", "linear", "exponential"):
        for step in (0, 7, 19):
            f = lr_factor(sched, 0.1, step, 20)
            assert 0.1 - 1e-12 <= f <= 1.0
        assert lr_factor(sched, 0.1, 0, 20) == 1.0
        assert math.isclose(lr_factor(sched, 0.1, 19, 20), 1.0 if sched == "constant" else 0.1, rel_tol=1e-12)
