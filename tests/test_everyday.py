"""The everyday layer of repcost-train: threads, start-up imports, Ctrl-C, refused configs, messages, provenance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest
import torch
from conftest import REPO
from omegaconf import OmegaConf

from repcost import threads
from repcost.errors import ConfigError, RepcostError

TINY = ["train.phases.0.steps=15", "train.phases.1.steps=0", "train.progress=false"]


# -- threads ----------------------------------------------------------------------------------------------------
def test_threads_rule(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "cores_available", lambda: 8)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 8)  # the process may use every core: the run queue counts
    monkeypatch.setattr(threads, "busy_elsewhere", lambda *_: 0)
    assert threads.choose(3)[0] == 3  # an explicit setting wins over everything
    assert threads.choose("auto", work=threads.SMALL_WORK * 10)[0] == 8
    assert threads.choose("auto", work=threads.SMALL_WORK * 10, concurrency=3)[0] == 8 // 3
    assert threads.choose("auto", work=threads.SMALL_WORK / 10)[0] == 1  # small model: one thread
    monkeypatch.setattr(threads, "busy_elsewhere", lambda *_: 6)
    assert threads.choose("auto", work=threads.SMALL_WORK * 10)[0] == 2  # 8 cores, 6 kept busy by others
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 16)  # a share of a bigger machine: its run queue says nothing
    assert threads.choose("auto", work=threads.SMALL_WORK * 10)[0] == 8
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert threads.choose("auto", work=threads.SMALL_WORK / 10) == (5, "OMP_NUM_THREADS")
    assert threads.choose(2)[0] == 2


def test_threads_setting_is_validated():
    from repcost.config import compose_config, validate

    assert validate(compose_config(["threads=2", "device=cpu"])).threads == 2
    assert validate(compose_config(["device=cpu"])).threads == "auto"
    for bad in ("0", "two", "true"):
        with pytest.raises(ConfigError, match=r"threads=.*allowed: auto or an integer >= 1"):
            validate(compose_config([f"threads={bad}", "device=cpu"]))


def test_threads_are_left_alone_for_library_use_and_shared_in_sweeps(monkeypatch):
    from omegaconf import OmegaConf
    from hydra.types import RunMode

    from repcost.train.job import launch_concurrency

    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_managed", {})
    assert threads.fit_to_model(10, 10) is None and torch.get_num_threads() == before  # no CLI job: untouched
    hc = OmegaConf.create({"mode": RunMode.MULTIRUN, "launcher": {"n_jobs": 2}})
    assert launch_concurrency(hc) == 2
    assert launch_concurrency(OmegaConf.create({"mode": RunMode.RUN, "launcher": {"n_jobs": 2}})) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", str(before))  # an explicit choice beats the sweep's share
    try:
        assert threads.apply("auto", concurrency=2) == (before, "OMP_NUM_THREADS")
        assert threads.fit_to_model(10, 10) == (before, "OMP_NUM_THREADS")
        monkeypatch.delenv("OMP_NUM_THREADS")
        assert threads.fit_to_model(10, 10) == (1, "small model") and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)



def _work(overrides: list[str]) -> float:
    """samples × parameters of a config's full-batch step, from its real data and model."""
    from repcost.config import compose_config, validate
    from repcost.data import load_data
    from repcost.models import build_model

    spec = validate(compose_config([*overrides, "device=cpu"]))
    data = load_data(spec.data)
    model = build_model(spec.model, data.d_in, data.d_out, spec.seed, data.x_train)
    return float(data.x_train.shape[0] * sum(p.numel() for p in model.parameters()))


def test_the_small_model_rule_keeps_the_demo_on_one_thread_and_lets_the_cores_decide_for_the_mnist_net(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "cores_available", lambda: 2)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    demo, mnist = _work([]), _work(["experiment=jacot22-fig1"])
    assert demo < threads.SMALL_WORK < mnist
    monkeypatch.setattr(threads, "busy_elsewhere", lambda *_: 0)
    assert threads.choose("auto", demo) == (1, "small model")
    assert threads.choose("auto", mnist)[0] == 2  # an idle 2-core machine: both cores
    monkeypatch.setattr(threads, "busy_elsewhere", lambda *_: 1)
    assert threads.choose("auto", mnist)[0] == 1  # beside one busy process: the free core


def test_this_process_threads_are_not_counted_as_busy_elsewhere(monkeypatch):
    import hashlib
    import threading

    stop = threading.Event()

    def hash_away() -> None:  # hashlib releases the GIL on large buffers: this thread runs beside the test
        block = bytes(1 << 22)
        while not stop.is_set():
            hashlib.sha256(block).digest()

    worker = threading.Thread(target=hash_away)
    worker.start()
    try:
        assert max(threads.own_running_threads() for _ in range(50)) >= 2
    finally:
        stop.set()
        worker.join()
    assert threads.own_running_threads() >= 1  # the reading thread itself

    class Proc(type(Path())):  # /proc/loadavg: 4 runnable tasks on the machine
        def read_text(self, *a, **k) -> str:
            return "0.50 0.40 0.30 4/120 999\n" if str(self) == "/proc/loadavg" else super().read_text(*a, **k)

    monkeypatch.setattr(threads, "Path", Proc)
    monkeypatch.setattr(threads, "own_running_threads", lambda: 3)  # 3 of them ours (e.g. spinning OpenMP workers)
    assert threads.busy_elsewhere(samples=1) == 1


# -- start-up ---------------------------------------------------------------------------------------------------
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
        "repcost.analysis.certificate")
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



def test_a_run_loads_neither_matplotlib_nor_scipy_optimize_and_its_helper_draws_the_figure(tmp_path):
    """The run's own process: the final certificate's solves (duality gap, Clarke measure at its kinks) without
    scipy.optimize, fit.png drawn by the helper (~0.3 s and ~0.45 s of imports off every 1-D run)."""
    run = tmp_path / "run"
    code = ("import sys; from repcost.cli.train import main\n"
            "import repcost.train.run as run; run.helper_pays = lambda: True  # as on an idle machine\n"
            f"sys.argv = ['repcost-train', 'train=certified', 'hydra.run.dir={run}', *{TINY!r}]; main()\n"
            "print('MODULES', *sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split("MODULES", 1)[1].split())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["cert.kinks"] > 0 and summary["cert.clarke_stationarity"] >= 0  # the Clarke measure was solved
    assert "cert.duality_gap" in summary and "clarabel" in loaded
    assert not any(m.startswith(("matplotlib", "scipy.optimize")) for m in loaded)
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


# -- Ctrl-C -----------------------------------------------------------------------------------------------------
def _train_cmd(run: Path) -> list[str]:
    return [sys.executable, "-m", "repcost.cli.train", f"hydra.run.dir={run}", "train.phases.0.steps=3000",
            "train.phases.1.steps=0", "train.progress=false", "train.log_every=50", "threads=1"]


def test_ctrl_c_checkpoints_says_one_line_exits_130_and_the_relaunch_resumes(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(_train_cmd(run), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    metrics, t0 = run / "metrics.jsonl", time.time()
    while not (metrics.exists() and metrics.stat().st_size > 0) and proc.poll() is None and time.time() - t0 < 120:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in out + err, out + err
    step = int(lines[0].split("interrupted at step ")[1].split()[0])
    assert lines[0] == f"interrupted at step {step} of 3000; relaunch the same command to resume"
    ck = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ck["status"] == "preempted" and ck["trainer"]["position"]["step"] == step
    assert "plugin_sources" not in OmegaConf.load(run / ".hydra" / "config.yaml")  # no plugins: no key

    again = subprocess.run(_train_cmd(run), cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"resuming {run} from step {step}" in again.stdout
    assert json.loads((run / "summary.json").read_text())["steps"] == 3000
    steps = [json.loads(ln)["step"] for ln in metrics.read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] >= 2950  # whole, no repeats
    assert not list(run.glob("metrics.*.jsonl"))


def test_a_fresh_start_moves_an_earlier_metrics_file_aside(tmp_path, caplog):
    from repcost.rundir import RunDir

    rd = RunDir(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"step": 0}\n{"step": 100}\n')
    w = rd.metrics(keep_before=0)
    w({"step": 0})
    w.close()
    (aside,) = tmp_path.glob("metrics.*.jsonl")
    assert aside.read_text() == '{"step": 0}\n{"step": 100}\n' and "moved to" in caplog.text
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 0}\n'
    rd.metrics(keep_before=50).close()  # a resume keeps the earlier steps and moves nothing
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 0}\n' and len(list(tmp_path.glob("metrics.*"))) == 2


# -- refused configs and messages -------------------------------------------------------------------------------
REFUSED = {  # override -> what the one line says (a type, a typo, a mismatch found after locking, a plugin name)
    "model.depth=three": "invalid config: model.depth='three'; allowed: an integer >= 2",
    "model.widht=30": "model.widht is not a key of this config; did you mean model.width?",
    "train.loss=cross_entropy": "needs a classification dataset",
    "model.name=resrelu": "plugins=[mypkg.module]",
}


@pytest.mark.parametrize("override", list(REFUSED))
def test_a_refused_config_is_one_line_and_leaves_no_directory(tmp_path, run_cli, override):
    p = run_cli("repcost-train", override, *TINY, cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [f"repcost-train: error: {p.stderr.split('error: ', 1)[1].strip()}"]
    assert REFUSED[override] in p.stderr
    assert not list(tmp_path.iterdir()), list(tmp_path.rglob("*"))


def test_a_refused_config_keeps_a_directory_that_existed(tmp_path, run_cli):
    run = tmp_path / "mine"
    run.mkdir()
    p = run_cli("repcost-train", "train.loss=cross_entropy", *TINY, f"hydra.run.dir={run}", cwd=tmp_path)
    assert p.returncode == 2 and run.is_dir()


def _compose_error(overrides: list[str]) -> str:
    from repcost.cli.hydra_errors import one_line
    from repcost.config import compose_config, validate

    try:
        validate(compose_config(overrides))
    except RepcostError as e:
        return str(e)
    except Exception as e:  # Hydra's composition errors, as the CLI words them
        return one_line(e)
    raise AssertionError(f"{overrides} was accepted")


@pytest.mark.parametrize("overrides, says", [
    (["model.depth=three"], "model.depth='three'; allowed: an integer >= 2"),
    (["model.init_scale=big"], "model.init_scale='big'; allowed: a positive number"),
    (["train.progress=maybe"], "train.progress='maybe'; allowed: true or false"),
    (["train.phases.0.steps=1.5"], "train.phases.0.steps=1.5; allowed: an integer >= 0"),
    (["data=mnist", "data.digits=seven"], "data.digits='seven'; allowed: null (all ten) or a non-empty list"),
    (["model.widht=30"], "model.widht is not a key of this config; did you mean model.width?"),
    (["trian.lam=1"], "did you mean train.lam?"),
    (["+model.widht=30"], "did you mean model.width?"),
    (["model=fcc"], "unknown model 'fcc'; did you mean fc? (allowed: fc, linear_relu, parallel)"),
    (["hydra/launcher=paralel"], "unknown hydra/launcher 'paralel'; did you mean parallel?"),
    (["model=resrelu"], "its model/resrelu.yaml goes in a --config-dir and its module in plugins=[mypkg.module]"),
    (["model.name=resrelu"], "allowed: one of fc, linear_relu, parallel; a plugin's name? load its module with "
                             "plugins=[mypkg.module]"),
    (["data.name=rnig"], "plugins=[mypkg.module]"),
])
def test_config_messages(overrides, says):
    msg = _compose_error([*overrides, "device=cpu"])
    assert says in msg and "\n" not in msg and "could not be converted" not in msg


def test_command_line_misuse_is_one_line_naming_the_fix(tmp_path, run_cli):
    from repcost.cli.train_args import check_argv

    with pytest.raises(RepcostError, match="options go before the overrides: repcost-train --config-dir /c seed=1 "
                                           "seed=2"):
        check_argv(["seed=1", "--config-dir", "/c", "seed=2"])
    with pytest.raises(RepcostError, match="unknown option --confg-dir; did you mean --config-dir"):
        check_argv(["--confg-dir", "/c"])
    with pytest.raises(RepcostError, match="--config-dir needs a value"):
        check_argv(["--config-dir"])
    with pytest.raises(RepcostError, match="cannot be combined"):
        check_argv(["-m", "--cfg", "job"])
    check_argv(["--config-dir", "/c", "-m", "seed=1", "seed=2"])  # the right order passes
    check_argv(["seed=1", "-m"])  # options after all the overrides: argparse reads these
    p = run_cli("repcost-train", "seed=1", "--config-dir", str(tmp_path), "model.width=3", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "options go before" in p.stderr


# -- provenance -------------------------------------------------------------------------------------------------
def test_provenance():
    from repcost.provenance import git_commit, provenance

    p = provenance()
    assert p["repcost_version"] == version("repcost") and p["python_version"] == sys.version.split()[0]
    assert p["torch_version"] == torch.__version__ and isinstance(p["plugins"], dict)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    if head:  # run from a checkout
        assert git_commit().removesuffix("-dirty") == head


PLUGIN = '''
import torch
from dataclasses import dataclass
from repcost.data import DataBundle
from repcost.registry import DATASETS


@dataclass
class LineConfig:
    name: str = "line"
    n_points: int = 6


@DATASETS.register("line", LineConfig)
def load_line(cfg: LineConfig) -> DataBundle:
    x = torch.linspace(-1, 1, cfg.n_points, dtype=torch.float64)[:, None]
    return DataBundle("line", x, SLOPE * x)


SLOPE = 2.0
'''


def test_a_plugin_source_change_makes_its_finished_run_stale(tmp_path, run_cli):
    import hashlib

    pkgs, conf = tmp_path / "pkgs", tmp_path / "conf"
    (pkgs / "linedata").mkdir(parents=True)
    (conf / "data").mkdir(parents=True)
    (conf / "data" / "line.yaml").write_text("name: line\nn_points: 6\n")
    src = pkgs / "linedata" / "__init__.py"
    src.write_text(PLUGIN)
    sweep = tmp_path / "sweep"
    args = ["--config-dir", str(conf), "-m", "data=line", "plugins=[linedata]", "model.width=4", *TINY,
            f"hydra.sweep.dir={sweep}"]

    def train() -> subprocess.CompletedProcess:
        p = run_cli("repcost-train", *args, cwd=tmp_path, env={"PYTHONPATH": str(pkgs)})
        assert p.returncode == 0, p.stderr
        return p

    train()
    (job,) = [d for d in sweep.iterdir() if (d / "FINISHED").exists()]
    saved = OmegaConf.load(job / ".hydra" / "config.yaml")
    assert dict(saved.plugin_sources) == {"linedata": hashlib.sha256(src.read_bytes()).hexdigest()}
    first = (job / "FINISHED").read_text()
    assert "already finished" in train().stdout  # unchanged plugin: the finished run is reused
    src.write_text(PLUGIN.replace("SLOPE = 2.0", "SLOPE = -3.0"))
    train()
    assert (job / "FINISHED").read_text() != first  # a new identity, trained afresh
    (aside,) = [d for d in sweep.iterdir() if d.name.startswith(f"{job.name}.stale-")]  # (the name holds [ ])
    assert (aside / "FINISHED").read_text() == first and "another config" in (aside / "MOVED_ASIDE").read_text()


def test_runs_without_plugins_keep_their_identity():
    from repcost.identity import run_hash

    cfg = json.loads((REPO / "tests" / "fixtures" / "legacy_run" / "summary.json").read_text())
    saved = OmegaConf.to_container(OmegaConf.load(REPO / "tests" / "fixtures" / "legacy_run" / ".hydra" /
                                                  "config.yaml"), resolve=False)
    assert run_hash({**saved, "plugin_sources": {}}) == run_hash(saved)
    assert run_hash({**saved, "plugin_sources": {"m": "0" * 64}}) != run_hash(saved)
    assert cfg["config_hash"]  # the fixture's own record (test_identity checks that it is still recognised)
