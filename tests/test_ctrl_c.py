"""Ctrl-C on repcost-train: a checkpoint, one line, exit 130, and a relaunch that resumes exactly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf


def _train_cmd(run: Path) -> list[str]:
    return [sys.executable, "-m", "repcost.cli.train", f"hydra.run.dir={run}", "train.phases.0.steps=3000",
            "train.phases.1.steps=0", "train.progress=false", "train.log_every=50", "threads=1"]


@pytest.mark.slow  # several seconds of process starts and training
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


def test_a_fresh_start_moves_an_earlier_metrics_file_aside(tmp_path):
    """A start killed before its first checkpoint leaves metrics.jsonl alone: the next fresh start moves it aside
    with the directory's other leftovers, and a resume keeps the lines before its step."""
    from repcost.rundir import METRICS, RunDir, metrics_sink
    from repcost.train.run import open_run

    rd = RunDir(tmp_path / "run")
    rd.path.mkdir()
    (rd.path / "metrics.jsonl").write_text('{"step": 0}\n{"step": 100}\n')
    assert open_run(rd, "hash") == ("fresh", None)
    (aside,) = tmp_path.glob("run.stale-*")
    assert (aside / "metrics.jsonl").read_text() == '{"step": 0}\n{"step": 100}\n'
    assert not (rd.path / "metrics.jsonl").exists()
    (rd.path / "metrics.jsonl").write_text('{"step": 0}\n{"step": 100}\n')
    metrics_sink(rd.file(METRICS), keep_before=50)
    assert (rd.path / "metrics.jsonl").read_text() == '{"step": 0}\n'
