"""Sweeps: joblib sweep collected and resumable, killed jobs rerun, SIGTERM resume is exact."""

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

TRAIN = [sys.executable, "-m", "repcost.cli.train"]
SWEEP = ["-m", "hydra/launcher=parallel", "hydra.launcher.n_jobs=2", "name=t", "seed=0,1,2",
         "model.width=8,16", "train=adam", "train.progress=false"]


def _env():
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def _rows(sweep: Path) -> list[dict]:
    with open(sweep / "runs.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_figure_rows_are_the_last_multiruns_jobs_only(tmp_path):
    """Job dirs left by an earlier multirun into the same sweep dir (e.g. a preset edited since) stay on disk and in
    runs.csv (last_sweep=False) but are not part of the figure rows."""
    from repcost.figures import finished_rows

    sweep = tmp_path / "outputs" / "sweeps" / "t"
    base = TRAIN + ["-m", "name=t", "model.width=4", "train=adam", "train.phases.0.steps=3", "train.progress=false"]
    for seeds in ("0,1", "1,2"):
        p = subprocess.run(base + [f"seed={seeds}"], cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
    assert {r["seed"]: r["last_sweep"] for r in _rows(sweep)} == {"0": "False", "1": "True", "2": "True"}
    assert "1 of them from an earlier multirun" in p.stdout
    assert sorted(r["seed"] for r in finished_rows(sweep)) == [1, 2]


@pytest.mark.slow
def test_joblib_sweep_collect_relaunch_and_killed_job(tmp_path):
    sweep = tmp_path / "outputs" / "sweeps" / "t"
    steps = "train.phases.0.steps=2000"
    p = subprocess.run(TRAIN + SWEEP + [steps], cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = _rows(sweep)
    assert len(rows) == 6 and {r["status"] for r in rows} == {"finished"}
    assert {(r["seed"], r["model.width"]) for r in rows} == {(s, w) for s in "012" for w in ("8", "16")}
    assert all(float(r["objective"]) > 0 for r in rows)
    assert {r["last_sweep"] for r in rows} == {"True"}  # every parallel job process recorded itself

    # relaunching the same sweep runs none of its jobs
    p = subprocess.run(TRAIN + SWEEP + [steps], cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=600)
    assert p.returncode == 0 and p.stdout.count("run finished:") == 0 and p.stdout.count("already finished") == 6

    # kill one job mid-way: rerun it alone (force) in its sweep directory and SIGKILL it once it is training
    job = sweep / "model.width=16,seed=2,train.phases.0.steps=2000,train=adam"
    finished = json.loads((job / "summary.json").read_text())
    proc = subprocess.Popen(TRAIN + ["-m", "name=t", "seed=2", "model.width=16", "train=adam", steps,
                                     "force=true", "train.progress=false"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(),
                            start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        m = job / "metrics.jsonl"
        if m.exists() and len(m.read_text().splitlines()) >= 3 and not (job / "FINISHED").exists():
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    rows = {r["job"]: r for r in subprocess_collect(tmp_path, sweep)}
    assert rows[job.name]["status"] == "unfinished"

    p = subprocess.run(TRAIN + SWEEP + [steps], cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.count("run finished:") == 1 and p.stdout.count("already finished") == 5
    assert f"run finished: {job}" in p.stdout
    again = json.loads((job / "summary.json").read_text())
    assert again["objective"] == pytest.approx(finished["objective"], rel=1e-12)
    assert {r["status"] for r in _rows(sweep)} == {"finished"}


def subprocess_collect(cwd, sweep):
    p = subprocess.run([sys.executable, "-m", "repcost.cli.collect", str(sweep)], cwd=cwd, capture_output=True,
                       text=True, env=_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    return _rows(sweep)


@pytest.mark.slow  # several seconds of process starts and training
def test_failed_job_leaves_others_intact(tmp_path):
    # width=0 is invalid: that job fails with its error line, the other job finishes
    p = subprocess.run(TRAIN + ["-m", "name=f", "model.width=0,4", "train.phases.0.steps=20", "train.phases.1.steps=0",
                                "train.progress=false"], cwd=tmp_path, capture_output=True, text=True, env=_env(),
                       timeout=300)
    rows = {r["model.width"]: r for r in _rows(tmp_path / "outputs" / "sweeps" / "f")}
    assert rows["4"]["status"] == "finished"
    assert rows["0"]["status"] == "failed" and "model.width=0" in rows["0"]["error"]
    failed_line = next(ln for ln in p.stderr.splitlines() if ln.startswith("job failed: "))
    assert str(tmp_path / "outputs" / "sweeps" / "f") in failed_line  # names the job's directory
    assert "Traceback" not in p.stderr


def _summary(d: Path) -> dict:
    s = json.loads((d / "summary.json").read_text())
    return {k: v for k, v in s.items() if k not in ("wall_time_s", "message", "git_commit")}


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1])
def test_signal_checkpoint_and_exact_resume(tmp_path, sig):
    args = ["model=fc", "data=teacher", "data.n_train=200", "data.n_test=50", "model.width=32", "train=adam_gd",
            "train.phases.0.steps=300", "train.phases.1.steps=100", "train.log_every=10", "train.progress=false",
            "dtype=float64", "device=cpu"]
    ref = tmp_path / "ref"
    p = subprocess.run(TRAIN + args + [f"hydra.run.dir={ref}"], cwd=tmp_path, capture_output=True, text=True,
                       env=_env(), timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]

    run = tmp_path / "run"
    proc = subprocess.Popen(TRAIN + args + [f"hydra.run.dir={run}"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())
    deadline = time.time() + 120
    while time.time() < deadline:
        m = run / "metrics.jsonl"
        if m.exists() and len(m.read_text().splitlines()) >= 5:
            break
        time.sleep(0.02)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert "preempted" in out and not (run / "FINISHED").exists() and (run / "checkpoint.pt").exists()

    p = subprocess.run(TRAIN + ["--resume", str(run)], cwd=tmp_path, capture_output=True, text=True, env=_env(),
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    a, b = _summary(ref), _summary(run)
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], float):
            assert b[k] == pytest.approx(a[k], rel=1e-12, abs=1e-12), k
        else:
            assert a[k] == b[k], k
    ref_steps = [json.loads(x)["step"] for x in (ref / "metrics.jsonl").read_text().splitlines()]
    run_steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert ref_steps == run_steps


@pytest.mark.slow
def test_submitit_local_sweep(tmp_path):
    p = subprocess.run(TRAIN + ["-m", "hydra/launcher=local_submitit", "name=s", "seed=0,1", "train.phases.0.steps=50",
                                "train.phases.1.steps=10", "train.progress=false"], cwd=tmp_path,
                       capture_output=True, text=True, env=_env(), timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = _rows(tmp_path / "outputs" / "sweeps" / "s")
    assert len(rows) == 2 and {r["status"] for r in rows} == {"finished"}


@pytest.mark.slow  # an end-to-end CLI run of several seconds
def test_job_directory_names_stay_short_and_long_old_names_are_reused(tmp_path):
    """A long set of overrides makes a short job directory name (a digest of the full set, which `.hydra/` keeps);
    a finished job under the full name an earlier repcost gave it is still found and reused."""
    import yaml

    from repcost.config.compose import MAX_JOB_DIR

    phases = "train.phases=[{optimizer:adam,lr:0.001,steps:3},{optimizer:gd,lr:0.01,steps:3}]"
    argv = TRAIN + ["-m", "name=long", phases, "model.width=5", "model.depth=3", "data.n_points=7", "seed=0,1",
                    "train.progress=false"]
    p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    sweep = tmp_path / "outputs" / "sweeps" / "long"
    jobs = sorted(d for d in sweep.iterdir() if (d / "FINISHED").exists())
    assert len(jobs) == 2 and all(len(j.name.encode()) <= MAX_JOB_DIR for j in jobs), [j.name for j in jobs]
    for j in jobs:
        assert phases in yaml.safe_load((j / ".hydra" / "overrides.yaml").read_text())
    full = yaml.safe_load((jobs[0] / ".hydra" / "hydra.yaml").read_text())["hydra"]["job"]["override_dirname"]
    assert len(full.encode()) > MAX_JOB_DIR
    old = jobs[0].rename(sweep / full)  # where a finished job of the same overrides lay before names were shortened
    stamp = (old / "FINISHED").stat().st_mtime_ns
    p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=600)
    assert p.returncode == 0 and p.stdout.count("already finished") == 2, p.stdout + p.stderr[-2000:]
    assert (old / "FINISHED").stat().st_mtime_ns == stamp and not jobs[0].exists()
