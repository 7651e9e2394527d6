"""Start-up of repcost-train: the modules an import, --help and a run load, and the fit-figure helper."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import torch


from helpers import REPO, TINY


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print('MODULES', *sys.modules)"],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    return {m.split(".")[0] for m in out.split("MODULES", 1)[1].split()}


def test_import_and_help_load_no_heavy_modules(tmp_path):
    heavy = {"torch", "matplotlib", "scipy", "cvxpy", "tensorboard", "submitit", "sklearn", "pandas"}
    assert not heavy & _modules_after("import repcost, repcost.cli.train, repcost.config.resolvers")
    loaded = _modules_after("import sys; sys.argv = ['repcost-train', '--help']\n"
                            "from repcost.cli.train import main; main()")
    assert not heavy & loaded
    assert not {"scipy", "cvxpy", "matplotlib"} & _modules_after("import repcost.analysis, repcost.models")
    # a run's own modules, up to its first step: scipy and matplotlib load only for the final certificate and figure
    assert not {"scipy", "cvxpy", "matplotlib", "tensorboard", "submitit"} & _modules_after(
        "import repcost.cli.collect, repcost.train.job, repcost.train.run, repcost.analysis.hooks, "
        "repcost.analysis.critical")
    import repcost
    import repcost.analysis as analysis

    assert repcost.load_run.__module__ == "repcost.api" and callable(analysis.cost_CL)
    assert analysis.hooks.__name__ == "repcost.analysis.hooks"  # a submodule by attribute, as before
    p = subprocess.run([sys.executable, "-m", "repcost.cli.train", "--help"], capture_output=True, text=True,
                       cwd=tmp_path)
    assert p.returncode == 0 and "model: fc, linear_relu, parallel" in p.stdout and "threads: auto" in p.stdout
    v = subprocess.run([sys.executable, "-m", "repcost.cli.train", "--version"], capture_output=True, text=True,
                       cwd=tmp_path)
    assert v.returncode == 0 and v.stdout.startswith(f"repcost-train {version('repcost')} (Hydra ")
    assert not list(tmp_path.iterdir())



def test_a_run_loads_no_matplotlib_and_its_helper_draws_the_figure(tmp_path):
    """The run's own process: the final certificate's solves (duality gap by Clarabel, Clarke measure at its kinks by
    scipy's bounded least squares), fit.png drawn by the helper (~0.45 s of imports off every 1-D run)."""
    run = tmp_path / "run"
    code = ("import sys; from repcost.cli.train import main\n"
            "import repcost.train.run as run; run.helper_pays = lambda: True  # as on an idle machine\n"
            f"sys.argv = ['repcost-train', 'train=certified', 'hydra.run.dir={run}', *{TINY!r}]; main()\n"
            "print('MODULES', *sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split("MODULES", 1)[1].split())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["critical.kinks"] > 0 and summary["critical.clarke_stationarity"] >= 0  # the Clarke measure was solved
    assert "certify.duality_gap" in summary and "clarabel" in loaded
    assert not any(m.startswith("matplotlib") for m in loaded)
    assert (run / "figures" / "fit.png").read_bytes().startswith(b"\x89PNG")


def test_the_fit_helper_draws_what_this_process_draws_and_a_failed_helper_falls_back(tmp_path):
    """Through the helper (JSON lines, exact floats) the PNG is byte for byte the one drawn in this process; a
    figure sent to a helper that dies before answering is drawn here by `wait`; closing ends the helper."""
    code = f"""
import os, signal, sys
from pathlib import Path
import numpy as np
from repcost.startup import load_torch
load_torch()  # as repcost-train: a fresh process that imported torch itself
from repcost.plots.fit_process import FitFigures, helper_pays
rng = np.random.default_rng(0)
g = np.linspace(-1.3, 1.3, 600); x = np.sort(rng.uniform(-1, 1, 7)); y = rng.normal(size=7)
arrays = dict(x_grid=g, f_grid=np.sin(3 * g), x=x, y=y, spline_grid=np.interp(g, x, y))
out = Path({str(tmp_path)!r})
with FitFigures(helper=True) as f:
    helper = f._proc
    assert helper is not None
    f.draw(out / "a" / "helper.png", "title", **arrays)
    f.wait()
    assert (out / "a" / "helper.png").exists() and "matplotlib" not in sys.modules
    os.kill(helper.pid, signal.SIGSTOP)  # the helper cannot answer: it dies before drawing what it is sent
    f.draw(out / "b" / "fallback.png", "title", **arrays)
    helper.kill(); helper.wait()
    f.wait()
    assert f._proc is None and "matplotlib.figure" in sys.modules and "matplotlib.pyplot" not in sys.modules
assert helper.returncode is not None
assert not helper_pays()  # matplotlib is loaded here now
with FitFigures(helper=False) as f:  # drawn before draw returns
    assert f._proc is None
    f.draw(out / "c" / "here.png", "title", **arrays)
    assert (out / "c" / "here.png").exists()
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    helper, fallback, here = (tmp_path / d / n for d, n in (("a", "helper.png"), ("b", "fallback.png"),
                                                             ("c", "here.png")))
    assert helper.read_bytes().startswith(b"\x89PNG") and helper.read_bytes() == fallback.read_bytes()
    assert here.read_bytes() == helper.read_bytes()


def test_the_fit_helper_starts_only_where_it_pays(monkeypatch):
    import repcost.plots.fit_process as fp

    monkeypatch.delitem(sys.modules, "matplotlib.figure", raising=False)
    monkeypatch.setattr(fp, "started_torch", lambda: True)
    monkeypatch.setattr(fp.threads, "cores_available", lambda: 2)
    monkeypatch.setattr(fp.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    monkeypatch.setattr(fp.threads, "busy_elsewhere", lambda samples=5, interval=0.01: 0)
    assert fp.helper_pays()  # an idle 2-core machine, a 1-thread run
    monkeypatch.setattr(fp.threads, "busy_elsewhere", lambda samples=5, interval=0.01: 1)
    assert not fp.helper_pays()  # the other core is busy
    monkeypatch.setattr(fp.threads, "busy_elsewhere", lambda samples=5, interval=0.01: 0)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert not fp.helper_pays()  # the run uses both cores
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    monkeypatch.setattr(fp, "started_torch", lambda: False)
    assert not fp.helper_pays()  # a notebook, a test or a sweep worker: drawn in process
    monkeypatch.setattr(fp, "started_torch", lambda: True)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", sys)
    assert not fp.helper_pays()  # matplotlib is loaded already


def test_load_torch_leaves_the_collector_as_it_was_and_torch_out_of_its_reach():
    code = ("import gc, sys; {}from repcost.startup import load_torch; load_torch(); "
            "print('torch' in sys.modules, gc.isenabled(), gc.get_freeze_count() > 10**5, len(gc.get_objects()) < 10**4)")
    for before, enabled in (("", "True"), ("gc.disable(); ", "False")):
        out = subprocess.run([sys.executable, "-c", code.format(before)], capture_output=True, text=True, cwd=REPO)
        assert out.stdout.split() == ["True", enabled, "True", "True"], out.stderr
    # torch loaded already (the CLI in a notebook or a test): the host process's objects stay the collector's
    out = subprocess.run([sys.executable, "-c", code.format("import torch; ")], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.split() == ["True", "True", "False", "False"], out.stderr
