"""repcost-train end to end through the real CLI, and its one-line errors for bad configs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch


def test_train_cli_writes_every_output(tmp_path, run_cli):
    p = run_cli("repcost-train", "train.phases.0.steps=50", "train.phases.1.steps=10", "seed=0", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    (d,) = (tmp_path / "outputs" / "runs").iterdir()  # named by the overrides
    assert d.name == "seed=0,train.phases.0.steps=50,train.phases.1.steps=10"
    for f in (".hydra/config.yaml", ".hydra/overrides.yaml", "metrics.jsonl", "summary.json", "checkpoint.pt"):
        assert (d / f).exists(), f
    s = json.loads((d / "summary.json").read_text())
    assert s["steps"] == 60 and s["seed"] == 0
    assert "seed: 0" in (d / ".hydra/config.yaml").read_text()
    ck = torch.load(d / "checkpoint.pt", weights_only=True)
    assert ck["status"] == "finished"
    assert str(d) in p.stdout and "objective=" in p.stdout
    assert not list(d.glob(".*.tmp*")) and not list(d.glob(".summary*"))  # no temp files left behind


def test_long_overrides_give_a_short_stable_job_dir():
    """Sweep job dirs are named by their overrides; a long one (a whole phases list) is cut and digested."""
    from repcost.config.compose import MAX_JOB_DIR, _job_dir
    assert _job_dir("model.width=8,seed=1") == "model.width=8,seed=1" and _job_dir("") == "base"
    long = "train.phases=[" + ",".join("{optimizer:adam,lr:0.001,steps:%d}" % i for i in range(12)) + "]"
    other = long[:-2] + "9]"
    assert len(_job_dir(long).encode()) <= MAX_JOB_DIR and _job_dir(long) == _job_dir(long)
    assert _job_dir(long) != _job_dir(other) and _job_dir(long).startswith("train.phases=[{optimizer:adam")


@pytest.mark.slow
def test_the_same_command_twice_at_once_trains_one_run(tmp_path):
    """Both launches share the default directory: one trains, the other is refused in one line naming the holder
    or, once the first has finished, reuses its run."""
    import subprocess
    import sys
    cmd = [sys.executable, "-m", "repcost.cli.train", "train.phases.0.steps=200", "train.phases.1.steps=0"]
    ps = [subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
          for _ in range(2)]
    outs = [(p.wait(timeout=120), *p.communicate()) for p in ps]
    assert sorted(code for code, _, _ in outs)[0] == 0, outs
    for code, out, err in outs:
        assert code == 0 or (code == 2 and "in use by a running repcost process" in err), (code, out, err)
    (d,) = (tmp_path / "outputs" / "runs").iterdir()
    assert (d / "FINISHED").exists() and not list(tmp_path.glob("outputs/runs/*.stale-*"))


BAD = [
    (["model.depth=1"], "model.depth=1", "integer >= 2"),
    (["model=fc", "model.width=0"], "model.width=0", "positive"),
    (["train.lam=-1"], "train.lam=-1.0", ">= 0"),
    (["model=fc", "model.slope=1.5"], "model.slope=1.5", "(-1, 1)"),
    (["model=resnet"], "unknown model 'resnet'", "fc, linear_relu, parallel"),
    (["data=cifar"], "unknown data 'cifar'", "points_1d"),
    (["train.phases.0.lr=0"], "train.phases.0.lr=0.0", "learning rate > 0"),
    (["dtype=float16"], "dtype='float16'", "float32 or float64"),
    (["model.foo=1"], "model.foo", "not a key"),
    (["+model.foo=1"], "model.foo", "keys of model"),
    (["model.depth=abc"], "model.depth='abc'", "allowed: an integer >= 2"),
    (["+train.phases.1.lam_factor=2"], "train.phases[-1].lam_factor=2.0", "last phase"),
]
if not torch.cuda.is_available():
    BAD.append((["device=cuda"], "device='cuda'", "no CUDA device"))


@pytest.mark.slow
@pytest.mark.parametrize("overrides,key,allowed", BAD, ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_bad_config_one_line_exit_2(tmp_path, run_cli, overrides, key, allowed):
    p = run_cli("repcost-train", *overrides, cwd=tmp_path)
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert key in lines[0] and allowed in lines[0]
    assert "Traceback" not in p.stderr + p.stdout
    assert not (tmp_path / "outputs" / "runs").exists() or not list((tmp_path / "outputs" / "runs").rglob("summary.json"))


@pytest.mark.parametrize("clarke, says", [(0.004, "0.004 over the slopes of 7 kinks of live units"),
                                          (float("nan"), "not computed over the slopes of 7 kinks: analysis.critical.max_kinks")])
def test_the_finished_line_states_the_clarke_measure(tmp_path, caplog, clarke, says):
    import logging

    from repcost.train.job import done

    summary = {"status": "finished", "steps": 10, "critical_point": False, "critical.stationarity": 0.5,
               "critical.clarke_stationarity": clarke, "critical.kinks": 7, "critical.unit_gap": 1e-3}
    with caplog.at_level(logging.INFO, logger="repcost"):
        done(summary, tmp_path)
    line = next(r.getMessage() for r in caplog.records if "critical point" in r.getMessage())
    assert f"stationarity 0.5, {says}, unit gap 0.001" in line and "nan" not in line


def test_a_sweeps_job_count_is_the_product_of_its_lists_the_command_line_over_the_sweeper_params():
    from omegaconf import OmegaConf

    from repcost.cli.guards import count_jobs

    config = OmegaConf.create({"hydra": {"sweeper": {"params": {"model.width": "2,3", "train.lam": "1,2,3,4"}},
                                         "overrides": {"task": ["seed=0,1,2", "model.width=4", "+extra=[1,2]"]}}})
    assert count_jobs(config) == 3 * 1 * 4  # seeds × the command line's one width × the params' four λ


def test_help_into_a_closed_pipe_is_silent(tmp_path):
    """`repcost-train --help | head`: the reader closing the pipe is no error to report."""
    p = subprocess.Popen([sys.executable, "-m", "repcost.cli.train", "--help"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()  # before the child writes: its first write meets a pipe with no reader
    err = p.stderr.read()
    assert p.wait(timeout=60) == 141 and err == ""
