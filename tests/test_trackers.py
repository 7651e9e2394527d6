"""MLflow and W&B (optional extras), read back from each tracker's own store and compared with the run directories
that the same runs wrote: a sweep through the real CLI, its relaunch, a resumed run, a broken tracker; and the
trackers stay out of a run that does not choose them."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from repcost.config import compose_config, validate
from repcost.errors import ConfigError

SWEEP = ["-m", "name=t", "seed=0,1", "model.width=4,8", "train=adam", "train.phases.0.steps=12", "train.log_every=4",
         "train.progress=false"]


def _offline_env(tmp: Path) -> dict:
    """W&B with no network: offline, silent, its own folders in `tmp`, and an unreachable server."""
    return {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONFIG_DIR": str(tmp / "wandb-config"),
            "WANDB_CACHE_DIR": str(tmp / "wandb-cache"), "WANDB_DATA_DIR": str(tmp / "wandb-data"),
            "WANDB_BASE_URL": "http://127.0.0.1:9"}


def _jobs(cwd: Path) -> list[Path]:
    return sorted(f.parent for f in (cwd / "outputs" / "sweeps" / "t").glob("*/FINISHED"))


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _overrides(run_dir: Path) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in run_dir.name.split(","))


def test_logger_values_and_missing_extras(monkeypatch):
    """`logger` is a name or a list; an unknown one, or one whose extra is missing, is a ConfigError naming the fix."""
    assert validate(compose_config(["device=cpu", "logger=none"])).logger == ()
    with pytest.raises(ConfigError, match="logger='comet'.*none, tensorboard, mlflow, wandb"):
        validate(compose_config(["device=cpu", "logger=[mlflow,comet]"]))
    with pytest.raises(ConfigError, match="tracking.mode='cloud'"):
        validate(compose_config(["device=cpu", "tracking.mode=cloud"]))
    for name in ("mlflow", "wandb"):
        monkeypatch.setitem(sys.modules, name, None)  # as if the extra were not installed
        with pytest.raises(ConfigError, match=rf"pip install 'repcost\[{name}\]'"):
            validate(compose_config(["device=cpu", f"logger={name}"]))


@pytest.mark.slow  # several seconds of process starts and training
def test_trackers_are_imported_only_when_chosen():
    """Start-up and validation of a run import no tracker."""
    code = ("import sys; from repcost.config import compose_config, validate; import repcost.cli.train, "
            "repcost.train.run; validate(compose_config(['device=cpu', 'logger=none'])); "
            "print(' '.join(m for m in ('mlflow', 'wandb', 'tensorboard') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "", done.stdout + done.stderr


def test_a_failing_tracker_is_a_warning_and_the_others_go_on(tmp_path, monkeypatch, caplog):
    from repcost import loggers

    seen: list[int] = []

    class Broken:  # e.g. its server went away after the second record
        run_id = None

        def __init__(self, *args):
            self.n = 0

        def log(self, rec):
            self.n += 1
            if self.n > 2:
                raise OSError("connection refused")

    class Fine(Broken):
        def log(self, rec):
            seen.append(rec["step"])

        def finish(self, summary):
            seen.append(-1)

    monkeypatch.setitem(loggers.KINDS, "broken", Broken)
    monkeypatch.setitem(loggers.KINDS, "fine", Fine)
    with caplog.at_level(logging.WARNING, logger="repcost"):
        t = loggers.Trackers(("broken", "fine"), tmp_path, {}, "h", resume=False)
        for s in range(5):
            t.call("log", {"step": s, "objective": 1.0})
        t.call("finish", {})
    assert seen == [0, 1, 2, 3, 4, -1]
    assert [r.getMessage() for r in caplog.records if "logger broken failed" in r.getMessage()] == [
        "logger broken failed and is off for the rest of this run (OSError: connection refused); "
        "metrics.jsonl is complete"]


@pytest.mark.slow  # an end-to-end CLI run of several seconds
def test_broken_tracking_uri_finishes_with_a_warning(tmp_path, run_cli):
    pytest.importorskip("mlflow")
    (tmp_path / "afile").write_text("not a directory")
    p = run_cli("repcost-train", "logger=mlflow", f"tracking.uri=sqlite:///{tmp_path}/afile/mlflow.db",
                "hydra.run.dir=run", "train=adam", "train.phases.0.steps=5", "train.progress=false", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (tmp_path / "run" / "FINISHED").exists()
    assert "logger mlflow failed and is off for the rest of this run" in (tmp_path / "run" / "train.log").read_text()


@pytest.mark.slow
def test_mlflow_sweep_reads_back_with_mlflow_client(tmp_path, run_cli):
    """A 4-job sweep is one MLflow experiment: per job its identity params, the metrics.jsonl curve, the final
    metrics equal to summary.json's, summary.json and the figures as artifacts; a relaunch logs nothing."""
    mlflow = pytest.importorskip("mlflow")
    p = run_cli("repcost-train", *SWEEP, "logger=mlflow", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/outputs/mlflow.db")  # the default store, next to the runs
    exp = client.get_experiment_by_name("t")
    runs = client.search_runs([exp.experiment_id])
    jobs = _jobs(tmp_path)
    assert len(jobs) == 4 and sorted(r.data.tags["repcost.run_dir"] for r in runs) == [str(j) for j in jobs]

    def curves():
        return {r.info.run_id: sorted((m.step, m.timestamp, m.value) for m in
                                      client.get_metric_history(r.info.run_id, "objective")) for r in runs}

    for r in runs:
        job = Path(r.data.tags["repcost.run_dir"])
        summary = json.loads((job / "summary.json").read_text())
        assert r.info.status == "FINISHED" and r.info.run_name == job.name
        assert r.data.params["model.width"] == _overrides(job)["model.width"]
        assert r.data.tags["repcost.config_hash"] == summary["config_hash"]
        assert r.data.tags["repcost.commit"] == summary["git_commit"]
        history = sorted(client.get_metric_history(r.info.run_id, "objective"), key=lambda m: m.step)
        assert [(m.step, m.value) for m in history] == [(x["step"], x["objective"]) for x in _records(job)]
        for key in ("train_loss", "objective", "param_sq_norm"):  # the final step, as summary.json has it
            assert r.data.metrics[key] == summary[key]
        assert {a.path for a in client.list_artifacts(r.info.run_id, "figures")} == {"figures/fit.png"}
        (tmp_path / "dl").mkdir(exist_ok=True)
        kept = client.download_artifacts(r.info.run_id, "summary.json", str(tmp_path / "dl"))
        assert json.loads(Path(kept).read_text()) == summary
    before = curves()
    p = run_cli("repcost-train", *SWEEP, "logger=mlflow", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr.count("already finished") + p.stdout.count("already finished") >= 4
    assert len(client.search_runs([exp.experiment_id])) == 4 and curves() == before
    assert len(client.search_experiments()) <= 2  # the sweep's, and MLflow's own Default


@pytest.mark.slow
def test_wandb_offline_sweep_reads_back_without_network(tmp_path, run_cli):
    """The same sweep with logger=wandb, stacked (several W&B runs in one process), offline: each job's .wandb file
    holds the config, the metrics.jsonl history, summary.json's numbers and the saved files; a relaunch adds none."""
    pytest.importorskip("wandb")
    from repcost.loggers import read_wandb_offline

    env = _offline_env(tmp_path)
    p = run_cli("repcost-train", *SWEEP, "hydra/launcher=stacked", "logger=wandb", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    jobs = _jobs(tmp_path)
    assert len(jobs) == 4
    ids = set()
    for job in jobs:
        [wandb_file] = job.glob("wandb/offline-run-*/run-*.wandb")
        run, summary = read_wandb_offline(wandb_file), json.loads((job / "summary.json").read_text())
        ids.add(run["run"]["id"])
        assert run["run"]["id"] == json.loads((job / "trackers.json").read_text())["wandb"]
        assert (run["run"]["project"], run["run"]["group"], run["run"]["name"]) == ("repcost", "t", job.name)
        assert run["run"]["tags"] == [summary["config_hash"]]
        assert run["config"]["model"]["width"] == int(_overrides(job)["model.width"])
        assert run["config"]["repcost"]["repcost.run_dir"] == str(job)
        assert [(h["_step"], h["objective"]) for h in run["history"]] == [(x["step"], x["objective"])
                                                                          for x in _records(job)]
        assert {k: run["summary"][k] for k in ("train_loss", "cost")} == {k: summary[k] for k in ("train_loss", "cost")}
        assert {"summary.json", "figures/fit.png"} <= set(run["files"])
    assert len(ids) == 4
    p = run_cli("repcost-train", *SWEEP, "hydra/launcher=stacked", "logger=wandb", cwd=tmp_path, env=env)
    assert p.returncode == 0 and all(len(list(j.glob("wandb/offline-run-*"))) == 1 for j in jobs)


@pytest.mark.slow
def test_resumed_run_continues_its_tracker_runs(tmp_path, monkeypatch):
    """A preempted run relaunched logs into the same MLflow run and the same W&B run id, up to its final step."""
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    from helpers import StopAfter
    from omegaconf import OmegaConf

    from repcost.loggers import read_wandb_offline
    from repcost.train.run import train_run

    for k, v in _offline_env(tmp_path).items():
        monkeypatch.setenv(k, v)
    cfg = compose_config(["logger=[mlflow,wandb]", f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", "train=adam",
                          "train.phases.0.steps=40", "train.log_every=5", "train.checkpoint_every=10",
                          "train.progress=false"])
    spec, plain, d = validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / "r"
    assert train_run(spec, plain, d, stop_flag=StopAfter(25))["status"] == "preempted"
    ids = json.loads((d / "trackers.json").read_text())
    assert train_run(validate(cfg), plain, d)["status"] == "finished"
    assert json.loads((d / "trackers.json").read_text()) == ids
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    [run] = client.search_runs([client.get_experiment_by_name("default").experiment_id])
    assert run.info.run_id == ids["mlflow"] and run.info.status == "FINISHED"
    steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, "objective"))
    assert steps == [x["step"] for x in _records(d)] and max(steps) == 40
    parts = sorted(d.glob("wandb/offline-run-*/run-*.wandb"), key=lambda p: p.stat().st_mtime)
    assert len(parts) == 2 and {read_wandb_offline(p)["run"]["id"] for p in parts} == {ids["wandb"]}
    assert read_wandb_offline(parts[-1])["history"][-1]["_step"] == 40
    # a run killed after its last checkpoint logs its later steps again when it resumes: MLflow keeps them once
    from repcost.loggers import MLflowTracker

    again = MLflowTracker(d, plain, "h", ids["mlflow"])
    for step in (35, 40, 45):
        again.log({"step": step, "objective": 1.0})
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "objective")) == steps + [45]
