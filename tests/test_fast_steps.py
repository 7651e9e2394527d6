"""Fast steps on the CPU (train.step): the auto rules, and compiled steps against eager (slow: a compile)."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from repcost.config import compose_config, validate
from repcost.data import load_data
from repcost.models import build_model
from repcost.train.engine import Engine
from repcost.train.run import train_run
from repcost.train.step import COMPILE_MIN_STEPS_CUDA, COMPILE_MIN_WORK_CPU, fast_step_options

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def _compiled(setting: str, device: torch.device, steps: int, K: int, n: int, n_params: int) -> bool:
    cfg = SimpleNamespace(compile=setting, cuda_graphs="off", total_steps=steps)
    return fast_step_options(cfg, device, K, n, n_params)["compiled"]


def _n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def test_auto_rules():
    """on/off are obeyed; auto compiles on CUDA from the step threshold, on the CPU from the work threshold."""
    assert _compiled("on", CPU, 1, 1, 1, 1) and not _compiled("off", CUDA, 10**9, 1, 1, 1)
    assert _compiled("auto", CUDA, COMPILE_MIN_STEPS_CUDA, 1, 1, 1)
    assert not _compiled("auto", CUDA, COMPILE_MIN_STEPS_CUDA - 1, 64, 10**6, 10**6)
    n = 1000
    steps_needed = int(COMPILE_MIN_WORK_CPU / (n * 10**5)) + 1
    assert _compiled("auto", CPU, steps_needed, 1, n, 10**5)
    assert not _compiled("auto", CPU, steps_needed // 2, 1, n, 10**5)
    assert _compiled("auto", CPU, steps_needed // 2, 2, n, 10**5)  # members count as work
    graphed = [fast_step_options(SimpleNamespace(compile="off", cuda_graphs=g, total_steps=1), dev, 1, 1, 1)["graphed"]
               for g, dev in [("auto", CUDA), ("on", CUDA), ("off", CUDA), ("auto", CPU)]]
    assert graphed == [True, True, False, False]


def test_short_cpu_runs_and_tests_stay_eager():
    """What every test and demo run gets: no compile (a paper-size CPU run compiles)."""
    spec = validate(compose_config(["experiment=jacot23-fig1-quick", "device=cpu"]))
    data = load_data(spec.data)
    model = build_model(spec.model, data.d_in, data.d_out, 0)
    quick = fast_step_options(spec.train, CPU, 1, data.x_train.shape[0], _n_params(model))
    spec_full = validate(compose_config(["experiment=jacot23-fig1", "device=cpu"]))
    data_full = load_data(spec_full.data)
    full = fast_step_options(spec_full.train, CPU, 1, data_full.x_train.shape[0],
                             _n_params(build_model(spec_full.model, data_full.d_in, data_full.d_out, 0)))
    assert quick == {"compiled": False, "graphed": False}
    assert full == {"compiled": True, "graphed": False}


def test_switches_are_not_identity(tmp_path):
    """A run trained eagerly is reused when asked again with train.compile=on (results agree to round-off)."""
    args = ["model=fc", "model.depth=2", "model.width=4", "data=teacher", "data.n_train=8", "data.n_test=0",
            "train.phases.0.steps=5", "train.progress=false"]
    cfg = compose_config(args + ["train.compile=off"])
    train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / "r")
    cfg = compose_config(args + ["train.compile=on"])
    again = train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / "r")
    assert again.get("reused") is True


needs_compiler = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                    reason="torch.compile on the CPU needs a C++ compiler")

PHASES = ("train.phases=[{optimizer:adam,lr:0.05,steps:40,lam_factor:10},"
          "{optimizer:sgd,lr:0.02,steps:40,batch_size:8,momentum:0.9},{optimizer:gd,lr:0.02,steps:40,schedule:cosine}]")


@pytest.mark.slow
@needs_compiler
@pytest.mark.parametrize("lams", [(1e-3,), (1e-3, 1e-2, 3e-3)])
def test_compiled_steps_match_eager_on_cpu(lams):
    """λ-continuation Adam, minibatch SGD with momentum, cosine GD: compiled = eager to 1e-10 (float64)."""
    base = ["train.progress=false", "model=fc", "model.depth=3", "model.width=8", "data=teacher", "data.n_train=24",
            "data.n_test=0", PHASES, "dtype=float64", "device=cpu"]
    specs = [validate(compose_config(base + [f"seed={i}", f"train.lam={lam}"])) for i, lam in enumerate(lams)]
    data = load_data(specs[0].data)
    out = []
    for compiled in (False, True):
        models = [build_model(sp.model, data.d_in, data.d_out, sp.seed).double() for sp in specs]
        if len(specs) == 1:
            Engine(models[:1], data, [specs[0].train], [specs[0].seed], compiled=compiled).run()
        else:
            Engine(models, data, [sp.train for sp in specs], [sp.seed for sp in specs], compiled=compiled).run()
        out.append([torch.cat([p.detach().flatten() for p in m.parameters()]) for m in models])
    for a, b in zip(*out):
        assert float((a - b).norm() / a.norm()) < 1e-10


def test_a_failing_compile_falls_back_to_eager(monkeypatch, caplog):
    """A compiler failure (no C++ compiler, a g++ killed by a job's signal) makes the run eager, not failed:
    the result equals the eager run's, and the warning says so."""
    import repcost.train.step as step

    def broken(*args, **kwargs):
        raise RuntimeError("BackendCompilerFailed: simulated")

    monkeypatch.setattr(step, "compile_once", lambda fn: broken)
    args = ["train.progress=false", "model=fc", "model.depth=2", "model.width=6", "data=teacher", "data.n_train=16",
            "data.n_test=0", "train=adam", "train.phases.0.steps=30", "dtype=float64", "device=cpu"]
    spec = validate(compose_config(args))
    data = load_data(spec.data)
    out = []
    for compiled in (False, True):
        m = build_model(spec.model, data.d_in, data.d_out, 0).double()
        with caplog.at_level("WARNING", logger="repcost"):
            r = Engine([m], data, [spec.train], [0], compiled=compiled).run()[0]
        out.append((r.stop_reason, r.steps, [p.detach().clone() for p in m.parameters()]))
    assert out[0][:2] == out[1][:2]
    assert all(torch.equal(a, b) for a, b in zip(out[0][2], out[1][2]))
    assert "torch.compile of the objective failed" in caplog.text
