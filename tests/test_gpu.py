"""The CUDA path: training and analyses on a GPU (skipped without one)."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from repcost.config import compose_config, validate
from repcost.train.run import train_run

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cuda_training_and_analysis(tmp_path, dtype):
    args = ["model=fc", "model.depth=4", "model.width=32", "data=rank_k", "data.n_train=200", "data.n_test=50",
            "train=adam", "train.phases.0.steps=200", "train.progress=false", "analysis=spectra", f"dtype={dtype}"]
    cfg = compose_config(args + ["device=cuda"])
    s = train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / "gpu")
    assert s["device"].startswith("cuda") and s["status"] == "finished"
    cfg = compose_config(args + ["device=cpu"])
    c = train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / "cpu")
    tol = 1e-3 if dtype == "float32" else 1e-8
    assert s["objective"] == pytest.approx(c["objective"], rel=tol)
    assert s["jacobian.prop3_bound"] == pytest.approx(c["jacobian.prop3_bound"], rel=tol)


# -- fast steps: compiled and CUDA-graph-captured steps agree with eager ---------------------
from repcost.data import load_data  # noqa: E402
from repcost.models import build_model  # noqa: E402
from repcost.train.engine import Engine  # noqa: E402

PHASES = ("train.phases=[{optimizer:adam,lr:0.02,steps:60,lam_factor:10},"
          "{optimizer:sgd,lr:0.02,steps:60,batch_size:16,momentum:0.9},"
          "{optimizer:gd,lr:0.02,steps:60,schedule:cosine}]")
FAST = [(False, True), (True, True)]  # (compiled, graphed) against eager (compiled alone: tests/test_fast_steps.py)


def _specs(lams, extra=()):
    base = ["train.progress=false", "model=fc", "model.depth=3", "model.width=16", "data=teacher",
            "data.n_train=48", "data.n_test=0", PHASES, "train.check_every=7", "dtype=float64", "device=cuda", *extra]
    return [validate(compose_config(base + [f"seed={i}", f"train.lam={lam}"])) for i, lam in enumerate(lams)]


def _train(specs, compiled, graphed):
    data = load_data(specs[0].data).to(torch.float64, torch.device("cuda"))
    models = [build_model(sp.model, data.d_in, data.d_out, sp.seed).to("cuda", torch.float64) for sp in specs]
    if len(specs) == 1:
        t = Engine(models[:1], data, [specs[0].train], [specs[0].seed], compiled=compiled, graphed=graphed)
        results = t.run()
    else:
        t = Engine(models, data, [sp.train for sp in specs], [sp.seed for sp in specs], compiled=compiled,
                   graphed=graphed)
        results = t.run()
    return [torch.cat([p.detach().flatten() for p in m.parameters()]).cpu() for m in models], results


@pytest.mark.parametrize("compiled,graphed", FAST)
@pytest.mark.parametrize("lams", [(1e-3,), (1e-3, 1e-2, 3e-3)])
def test_fast_steps_match_eager(compiled, graphed, lams):
    """λ-continuation Adam, minibatch SGD with momentum, cosine GD; one run and a stacked λ grid."""
    ref, r0 = _train(_specs(lams), False, False)
    got, r1 = _train(_specs(lams), compiled, graphed)
    for a, b, x, y in zip(ref, got, r0, r1):
        assert (x.stop_reason, x.steps) == (y.stop_reason, y.steps)
        assert float((a - b).norm() / a.norm()) < 1e-9


@pytest.mark.parametrize("compiled,graphed", FAST)
def test_fast_steps_stop_rules(compiled, graphed):
    """grad_tol and plateau stop at the eager run's steps; a diverging member is restored and stopped."""
    extra = ("train.grad_tol=2e-2", "train.plateau_window=40", "train.diverge_factor=0")
    ref, r0 = _train(_specs((1e-3, 1e-1, 3e-3), extra), False, False)
    got, r1 = _train(_specs((1e-3, 1e-1, 3e-3), extra), compiled, graphed)
    assert [(x.stop_reason, x.steps) for x in r0] == [(y.stop_reason, y.steps) for y in r1]
    for a, b in zip(ref, got):
        assert float((a - b).norm() / a.norm()) < 1e-9
    bad = ("train.phases=[{optimizer:gd,lr:200.0,steps:60}]",)
    ref, r0 = _train(_specs((1e-3,), bad + ("train.diverge_factor=0",)), False, False)
    got, r1 = _train(_specs((1e-3,), bad + ("train.diverge_factor=0",)), compiled, graphed)
    assert r0[0].stop_reason == r1[0].stop_reason == "non_finite" and r0[0].steps == r1[0].steps
    assert torch.isfinite(got[0]).all() and torch.allclose(ref[0], got[0], rtol=1e-9)


def test_auto_switches_on_cuda(tmp_path):
    """train.compile/cuda_graphs=auto through the real entry point: a CUDA run finishes and matches eager."""
    args = ["model=fc", "model.depth=3", "model.width=16", "data=teacher", "data.n_train=48", "data.n_test=0",
            "train=adam", "train.phases.0.steps=2500", "train.progress=false", "dtype=float64", "device=cuda"]
    out = {}
    for sw in ("auto", "off"):
        cfg = compose_config(args + [f"train.compile={sw}", f"train.cuda_graphs={sw}"])
        out[sw] = train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / sw)
    assert out["auto"]["status"] == "finished"
    assert out["auto"]["objective"] == pytest.approx(out["off"]["objective"], rel=1e-8)
