"""No finished result is ever lost: refused overwrites, force moves aside, one process per run dir, sweeps keep
old jobs, resume hygiene, readable permissions, and repcost-analyze never touching training-time files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import pytest
from pathlib import Path

from repcost.rundir import RunDir
from helpers import QUICK, train, assert_one_line, StopAfter



def _files(d: Path) -> dict[str, bytes]:
    """A run dir's results (the lock and the job's log file stay with the live directory when it is moved aside)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*")
            if p.is_file() and p.name != ".lock" and p.suffix != ".log"}


def test_finished_run_is_never_overwritten_and_force_moves_it_aside(tmp_path):
    d = tmp_path / "run"
    assert train([*QUICK, f"hydra.run.dir={d}"], tmp_path)[0] == 0
    before = _files(d)
    code, out, _ = train([*QUICK, f"hydra.run.dir={d}"], tmp_path)
    assert code == 0 and "already finished" in out and _files(d) == before
    code, _, err = train([*QUICK, "train.lam=1e-3", f"hydra.run.dir={d}"], tmp_path)
    assert_one_line(code, err, "holds a finished run of another config", "force=true")
    code, _, err = train(["--resume", str(d), "train.lam=1e-3"], tmp_path)
    assert_one_line(code, err, "holds a finished run of another config")
    assert _files(d) == before
    code, _, err = train([*QUICK, "train.lam=1e-3", "force=true", f"hydra.run.dir={d}"], tmp_path)
    assert code == 0, err
    (aside,) = tmp_path.glob("run.stale-*")
    moved = _files(aside)
    assert {k: v for k, v in moved.items() if k != "MOVED_ASIDE"} == before  # the old run, whole
    assert json.loads((d / "summary.json").read_text())["config_hash"] != json.loads(before["summary.json"])["config_hash"]


@pytest.mark.slow  # several seconds of process starts and training
def test_a_second_process_is_refused_and_a_stale_lock_taken_over(tmp_path):
    d = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from repcost.rundir import RunDir\n"
        f"with RunDir({str(d)!r}).locked():\n    print('locked', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        code, _, err = train([*QUICK, f"hydra.run.dir={d}"], tmp_path)
        assert_one_line(code, err, "in use by a running repcost process", f"pid {holder.pid}")
        assert not (d / "error.txt").exists()
    finally:
        holder.kill()
        holder.wait()
    # the killed holder's lock file (with its pid) is still there, but the OS lock died with it
    assert (d / ".lock").read_text().strip() == str(holder.pid)
    code, _, err = train([*QUICK, f"hydra.run.dir={d}"], tmp_path)
    assert code == 0, err


def _sweep(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repcost.cli.train", "-m", "name=s", *QUICK, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_sweep_relaunch_keeps_finished_and_moves_changed_jobs_aside(tmp_path):
    p = _sweep(tmp_path, "seed=0,1")
    assert p.returncode == 0, p.stderr
    sweep = tmp_path / "outputs" / "sweeps" / "s"
    jobs = sorted(j for j in sweep.iterdir() if j.is_dir())
    before = {j.name: _files(j) for j in jobs}
    p = _sweep(tmp_path, "seed=0,1", "device=cpu")  # device is not in job names, and cpu = auto here
    assert p.returncode == 0 and p.stdout.count("already finished") == 2, p.stdout + p.stderr
    assert {j.name: _files(j) for j in jobs} == before
    p = _sweep(tmp_path, "seed=0,1", "train.phases.0.lr=0.02")  # a new job dir: others untouched
    assert p.returncode == 0
    # an edited preset: same job dirs, another config -> the old jobs are moved aside, never deleted
    p = _sweep(tmp_path, "seed=0,1", "train.lam=0.5", "hydra.job.config.override_dirname.exclude_keys=[name,force,device,train.progress,train.checkpoint_every,hydra.launcher.n_jobs,train.lam]")
    assert p.returncode == 0, p.stderr
    for j in jobs:
        (aside,) = sweep.glob(f"{j.name}.stale-*")
        assert {k: v for k, v in _files(aside).items() if k != "MOVED_ASIDE"} == before[j.name]
    import csv
    rows = list(csv.DictReader(open(sweep / "runs.csv")))
    assert not any(".stale-" in r["job"] for r in rows)


def test_resume_removes_temp_files_and_checkpoints_carry_time(tmp_path):
    import torch
    from omegaconf import OmegaConf

    from repcost.config import compose_config, validate
    from repcost.train.run import train_run

    cfg = compose_config(["train.progress=false", "train.phases.0.steps=40", "train.phases.1.steps=0",
                          "train.checkpoint_every=10"])
    spec, d = validate(cfg), tmp_path / "run"
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert train_run(spec, plain, d, stop_flag=StopAfter(25))["status"] == "preempted"
    periodic = torch.load(d / "checkpoint.pt", weights_only=True)
    assert periodic["status"] == "preempted" and periodic["wall_time_s"] > 0
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (d / f".checkpoint.pt.{dead}.tmp").write_bytes(b"half a checkpoint")  # a write killed mid-way
    (d / f".summary.json.{dead}.tmp").write_bytes(b"half a summary")
    summary = train_run(spec, plain, d)
    assert summary["status"] == "finished" and summary["steps"] == 40
    assert not list(d.glob(".checkpoint.pt.*")) and not list(d.glob(".summary.json.*"))
    assert summary["wall_time_s"] >= periodic["wall_time_s"]
    # a periodic checkpoint written mid-run carries the time trained so far
    d2 = tmp_path / "run2"
    seen = []
    orig, orig_finish = RunDir.save_checkpoint, RunDir.finish

    def spy(self, obj):
        seen.append(obj["wall_time_s"])
        orig(self, obj)

    def spy_finish(self, checkpoint, summary, chash):  # the final checkpoint, written with the summary and FINISHED
        seen.append(checkpoint["wall_time_s"])
        orig_finish(self, checkpoint, summary, chash)

    RunDir.save_checkpoint, RunDir.finish = spy, spy_finish
    try:
        train_run(spec, plain, d2)
    finally:
        RunDir.save_checkpoint, RunDir.finish = orig, orig_finish
    assert len(seen) == 5 and all(t > 0 for t in seen) and seen == sorted(seen)


def test_result_files_respect_the_umask(tmp_path):
    d = tmp_path / "run"
    old = os.umask(0o022)
    try:
        code, _, err = train([*QUICK, f"hydra.run.dir={d}"], tmp_path)
    finally:
        os.umask(old)
    assert code == 0, err
    for name in ("checkpoint.pt", "summary.json", "FINISHED", "metrics.jsonl", ".hydra/config.yaml"):
        mode = stat.S_IMODE((d / name).stat().st_mode)
        assert mode == 0o644, (name, oct(mode))


@pytest.mark.slow  # an end-to-end CLI run of several seconds
def test_analyze_never_touches_the_runs_own_files(tmp_path, run_cli):
    d = tmp_path / "run"
    code, _, err = train([*QUICK, "analysis=spectra", f"hydra.run.dir={d}"], tmp_path)
    assert code == 0, err
    before = _files(d)
    p = run_cli("repcost-analyze", str(d), "analysis.n_points=3", "analysis.options.rel_tol=0.1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    after = _files(d)
    assert {k: v for k, v in after.items() if not k.startswith("reanalysis/")} == before
    (out,) = d.glob("reanalysis/*/analysis/summary.json")
    assert json.loads(out.read_text())["overrides"] == ["analysis.n_points=3", "analysis.options.rel_tol=0.1"]


@pytest.mark.slow
def test_analyze_applies_overrides_on_a_run_without_analyses(tmp_path, run_cli):
    d = tmp_path / "run"
    assert train([*QUICK, "model=fc", "model.width=5", f"hydra.run.dir={d}"], tmp_path)[0] == 0
    p = run_cli("repcost-analyze", str(d), "analysis.n_points=3", "--out", str(tmp_path / "re"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    import numpy as np
    assert np.load(tmp_path / "re" / "analysis" / "jacobian.npz")["jacobian_s"].shape[0] == 3


@pytest.mark.slow  # an end-to-end CLI run of several seconds
def test_the_same_command_resumes_a_ctrl_c_run_in_the_default_directory(tmp_path):
    """No hydra.run.dir: the default directory follows from the overrides, so Ctrl-C, then the same command,
    resumes the run from the interrupted step and finishes it; the command after that reuses it."""
    import signal
    import time

    cmd = [sys.executable, "-m", "repcost.cli.train", "model=fc", "data=teacher", "train.phases.0.steps=3000",
           "train.phases.1.steps=0", "train.progress=false", "train.log_every=50", "threads=1"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    runs = tmp_path / "outputs" / "runs"
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    t0 = time.time()
    while not any(runs.glob("*/metrics.jsonl")) and proc.poll() is None and time.time() - t0 < 120:
        time.sleep(0.05)
    time.sleep(0.5)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "relaunch the same command to resume" in out + err, out + err
    (run,) = runs.iterdir()
    step = RunDir(run).load_checkpoint()["trainer"]["position"]["step"]
    assert 0 < step < 3000

    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"resuming {run} from step {step}" in again.stdout
    assert [p.name for p in runs.iterdir()] == [run.name]
    assert json.loads((run / "summary.json").read_text())["steps"] == 3000
    steps = [json.loads(ln)["step"] for ln in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == 3000  # whole, no repeats

    third = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert third.returncode == 0 and "already finished" in third.stdout, third.stderr
