"""Stacked runs (repcost.train.run.train_runs) and the stacked sweep launcher (hydra/launcher=stacked): each run's
directory is its single run's, to 1e-12 in float64; reuse, resume after preemption, grouping, bad options."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from repcost.config import compose_config, validate
from repcost.errors import RepcostError
from repcost.identity import run_hash, stack_key
from repcost.rundir import load_checkpoint
from repcost.train.run import train_run, train_runs
from helpers import StopAfter

from hydra_plugins.repcost_stacked_launcher.stacked_launcher import plan_groups

TRAIN = [sys.executable, "-m", "repcost.cli.train"]
BASE = ["model=fc", "model.depth=3", "model.width=8", "data=teacher", "data.n_train=24", "data.n_test=8",
        "train.phases=[{optimizer:adam,lr:0.05,steps:40},{optimizer:gd,lr:0.02,steps:40,schedule:cosine}]",
        "train.check_every=5", "train.log_every=5", "train.target_loss=7.8", "train.progress=false",
        "dtype=float64", "device=cpu"]
# (seed, λ, lr of phase 0, lr of phase 1, init_scale): B reaches the target loss at step 15, D diverges at step 45
GRID = {"A": (0, 1e-3, 0.05, 0.02, 1.0), "B": (1, 1e-2, 0.05, 0.02, 1.0), "C": (0, 1e-3, 0.05, 0.03, 1.2),
        "D": (0, 1e-3, 0.05, 2.0, 1.0)}
VOLATILE = ("wall_time_s", "git_commit", "message")


def _config(seed, lam, lr0, lr1, scale):
    cfg = compose_config([*BASE, f"seed={seed}", f"train.lam={lam}", f"train.phases.0.lr={lr0}",
                          f"train.phases.1.lr={lr1}", f"model.init_scale={scale}"])
    return validate(cfg), OmegaConf.to_container(cfg, resolve=True)


def _summary(d: Path) -> dict:
    return {k: v for k, v in json.loads((d / "summary.json").read_text()).items() if k not in VOLATILE}


def _assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], float):
            assert b[k] == pytest.approx(a[k], rel=1e-12, abs=1e-300), k
        else:
            assert a[k] == b[k], k


@pytest.fixture(scope="module")
def singles(tmp_path_factory):
    """Each grid run alone (train_run): the reference directories."""
    root = tmp_path_factory.mktemp("singles")
    for name, row in GRID.items():
        spec, cfg = _config(*row)
        try:
            train_run(spec, cfg, root / name)
        except RepcostError:
            assert name == "D"
    return root


def _run_grid(root: Path, names, stop_flag=None):
    made = [_config(*GRID[n]) for n in names]
    return train_runs([m[0] for m in made], [m[1] for m in made], [root / n for n in names], stop_flag=stop_flag)


def test_plan_groups():
    assert plan_groups(["a", "b", "a", None, "a"], 64) == [[0, 2, 4], [1], [3]]
    assert plan_groups(["a"] * 5, 2) == [[0, 1], [2, 3], [4]]  # ceil(5/2) = 3 near-equal groups
    assert plan_groups(["a"] * 7, 4) == [[0, 1, 2, 3], [4, 5, 6]]
    assert plan_groups(["a", "a", "a"], 64, dirs=["x", "y", "x"]) == [[0, 1], [2]]  # same dir: not together


def test_stack_key_ignores_only_stackable_keys():
    keys = {n: stack_key(_config(*row)[1]) for n, row in GRID.items()}
    assert len(set(keys.values())) == 1
    cfg = _config(*GRID["A"])[1]
    cfg["model"]["width"] = 9
    assert stack_key(cfg) != keys["A"]
    cfg["train"]["ensemble_size"] = 2
    assert stack_key(cfg) is None


@pytest.mark.slow  # several seconds of process starts and training
def test_stacked_runs_write_their_single_runs(singles, tmp_path):
    out = dict(zip(GRID, _run_grid(tmp_path, list(GRID))))
    assert isinstance(out["D"], RepcostError) and "diverge" in str(out["D"])
    assert {n: out[n]["stop_reason"] for n in "ABC"} == {"A": "budget", "B": "target_loss", "C": "budget"}
    for n, row in GRID.items():
        _assert_same(_summary(singles / n), _summary(tmp_path / n))
        ck = load_checkpoint(tmp_path / n / "checkpoint.pt")
        assert ck["config_hash"] == run_hash(_config(*row)[1]) == _summary(tmp_path / n)["config_hash"]
        assert set(ck["trainer"]) == set(load_checkpoint(singles / n / "checkpoint.pt")["trainer"])
        ref_lines = (singles / n / "metrics.jsonl").read_text().splitlines()
        lines = (tmp_path / n / "metrics.jsonl").read_text().splitlines()
        assert [json.loads(x)["step"] for x in lines] == [json.loads(x)["step"] for x in ref_lines]
        assert (tmp_path / n / "figures" / "fit.png").exists() == (singles / n / "figures" / "fit.png").exists()
    assert (tmp_path / "D" / "error.txt").read_text() == (singles / "D" / "error.txt").read_text()
    for n in "ABC":  # a finished stacked run is a finished single run: reused
        assert (tmp_path / n / "FINISHED").read_text().strip() == run_hash(_config(*GRID[n])[1])
        assert train_run(*_config(*GRID[n]), tmp_path / n)["reused"] is True
    # configs that differ in more than the stackable keys are refused, naming the key
    a, b = _config(*GRID["A"]), _config(*GRID["B"])
    b[1]["model"]["width"] = 9
    with pytest.raises(RepcostError, match="model.width differs"):
        train_runs([a[0], b[0]], [a[1], b[1]], [tmp_path / "x", tmp_path / "y"])


@pytest.mark.slow  # several seconds of process starts and training
def test_preempted_stacked_runs_resume_each_from_its_own_checkpoint(singles, tmp_path):
    out = dict(zip(GRID, _run_grid(tmp_path, list(GRID), stop_flag=StopAfter(60))))
    assert out["A"]["status"] == out["C"]["status"] == "preempted"
    assert out["B"]["stop_reason"] == "target_loss" and (tmp_path / "B" / "FINISHED").exists()  # stopped before
    assert isinstance(out["D"], RepcostError) and (tmp_path / "D" / "error.txt").exists()
    for n in "AC":
        ck = load_checkpoint(tmp_path / n / "checkpoint.pt")
        assert ck["status"] == "preempted" and ck["trainer"]["position"]["step"] == out[n]["steps"] > 45
        assert not (tmp_path / n / "FINISHED").exists()
    # A resumes as a single run; C (resumed), D (failed: starts over) and B (finished) as a stacked relaunch
    train_run(*_config(*GRID["A"]), tmp_path / "A")
    again = dict(zip("BCD", _run_grid(tmp_path, ["B", "C", "D"])))
    assert again["B"]["reused"] is True and again["C"]["status"] == "finished"
    assert isinstance(again["D"], RepcostError)
    for n in GRID:
        _assert_same(_summary(singles / n), _summary(tmp_path / n))


# -- the launcher, through the real CLI ------------------------------------------------------------------
SWEEP = ["-m", "model=fc", "model.depth=3", "model.width=8", "data=teacher", "data.n_train=24", "data.n_test=8",
         "train=adam", "train.phases.0.steps=40", "train.log_every=5", "dtype=float64", "device=cpu",
         "train.progress=false", "seed=0,1", "train.lam=1e-3,1e-2"]


def _env():
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def _train(args, cwd, timeout=600):
    p = subprocess.run(TRAIN + args, cwd=cwd, capture_output=True, text=True, env=_env(), timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def _rows(sweep: Path) -> dict:
    with open(sweep / "runs.csv", newline="") as f:
        return {r["job"]: {k: v for k, v in r.items() if k not in (*VOLATILE, "name")} for r in csv.DictReader(f)}


def _close_rows(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for job in a:
        assert a[job].keys() == b[job].keys()
        for k, v in a[job].items():
            try:
                assert float(b[job][k]) == pytest.approx(float(v), rel=1e-12, abs=1e-300), (job, k)
            except ValueError:
                assert b[job][k] == v, (job, k)


@pytest.mark.slow
def test_stacked_sweep_equals_unstacked_and_is_reused(tmp_path):
    sweeps = tmp_path / "outputs" / "sweeps"
    _train([*SWEEP, "name=u"], tmp_path)
    p = _train([*SWEEP, "name=s", "hydra/launcher=stacked"], tmp_path)
    assert "4 jobs as 1 stacked group(s)" in p.stdout + p.stderr
    jobs = sorted(d.name for d in (sweeps / "s").iterdir() if (d / ".hydra").is_dir())
    assert jobs == sorted(d.name for d in (sweeps / "u").iterdir() if (d / ".hydra").is_dir()) and len(jobs) == 4
    for j in jobs:
        _assert_same(_summary(sweeps / "u" / j), _summary(sweeps / "s" / j))
        for f in ("config.yaml", "overrides.yaml"):  # the same provenance, but for the sweep's name
            text = (sweeps / "s" / j / ".hydra" / f).read_text().replace("name: s", "name: u").replace("name=s", "name=u")
            assert (sweeps / "u" / j / ".hydra" / f).read_text() == text
    _close_rows(_rows(sweeps / "u"), _rows(sweeps / "s"))
    # relaunches reuse every job: stacked over the unstacked sweep, and the stacked one in groups of at most 3
    for name, extra in (("u", []), ("s", ["hydra.launcher.max_members=3"])):
        p = _train([*SWEEP, f"name={name}", "hydra/launcher=stacked", *extra], tmp_path)
        assert p.stdout.count("already finished") == 4 and "run finished" not in p.stdout
    assert "4 jobs as 2 stacked group(s)" in p.stdout + p.stderr


@pytest.mark.slow
def test_preempted_stacked_sweep_resumes(tmp_path):
    sweeps = tmp_path / "outputs" / "sweeps"
    args = [*SWEEP, "hydra/launcher=stacked", "data.n_train=200", "model.width=32", "train.phases.0.steps=400",
            "train.log_every=10"]
    _train([*args, "name=ref"], tmp_path)
    proc = subprocess.Popen(TRAIN + [*args, "name=p"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env())
    deadline = time.time() + 120
    while time.time() < deadline:
        ms = list((sweeps / "p").glob("*/metrics.jsonl"))
        if ms and len(ms[0].read_text().splitlines()) >= 5:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    cks = [load_checkpoint(c) for c in sorted((sweeps / "p").glob("*/checkpoint.pt"))]
    assert len(cks) == 4 and {c["status"] for c in cks} == {"preempted"}
    assert not list((sweeps / "p").glob("*/FINISHED"))
    p = _train([*args, "name=p"], tmp_path)
    assert p.stdout.count("resuming") == 4  # each job from its own checkpoint
    for j in (sweeps / "ref").iterdir():
        if (j / "summary.json").exists():
            _assert_same(_summary(j), _summary(sweeps / "p" / j.name))


@pytest.mark.slow
@pytest.mark.parametrize("opt,msg", [("hydra.launcher.max_members=0", "max_members=0"),
                                     ("hydra.launcher.submitit=pbs", "submitit=pbs"),
                                     ("hydra.launcher.n_jobs=0", "n_jobs=0")])
def test_bad_launcher_options_are_one_line(tmp_path, opt, msg):
    p = subprocess.run(TRAIN + ["-m", "hydra/launcher=stacked", opt, "seed=0,1", "train.phases.0.steps=2"],
                       cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert msg in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.slow
def test_stacked_groups_as_submitit_local_jobs(tmp_path):
    """Each group one submitit job (cluster=local here; slurm is the same executor with submitit=slurm)."""
    p = _train([*SWEEP, "name=sm", "hydra/launcher=stacked", "hydra.launcher.submitit=local",
                "hydra.launcher.max_members=2", "++hydra.launcher.submitit_params={timeout_min: 10}"], tmp_path,
               timeout=900)
    assert "4 jobs as 2 stacked group(s)" in p.stdout + p.stderr
    rows = _rows(tmp_path / "outputs" / "sweeps" / "sm")
    assert len(rows) == 4 and {r["status"] for r in rows.values()} == {"finished"}
