"""TensorBoard logging (optional extra): events written by TensorBoardTracker read back; the logger key validated."""

from __future__ import annotations

import math

import pytest

from repcost.config import compose_config, validate
from repcost.errors import ConfigError


def test_event_file_reads_back(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from repcost.loggers import TensorBoardTracker

    recs = [{"step": s, "objective": 1.0 / (s + 1), "train_loss": 2.0 / (s + 1), "phase": 0} for s in (0, 10, 20)]
    recs.append({"step": 20, "analysis": {"jacobian": {"rank_mean": 3.5}}})  # nested keys become groups
    logger = TensorBoardTracker(tmp_path, {"model": {"name": "fc", "depth": 3, "width": [4, 4]}, "train": {"lam": 1e-3}}, "h")
    for r in recs:
        logger.log(r)
    logger.finish({"objective": 0.05, "status": "finished"})
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"objective", "train_loss", "analysis/jacobian/rank_mean"} <= set(tags)
    events = acc.Scalars("objective")
    assert [e.step for e in events] == [0, 10, 20]
    assert all(math.isclose(e.value, 1.0 / (e.step + 1), rel_tol=1e-6) for e in events)  # stored as float32
    assert acc.Scalars("analysis/jacobian/rank_mean")[0].value == 3.5
    assert acc.PluginTagToContent("hparams")  # the hyper-parameters, in the run's own event directory


def test_logger_key_is_validated():
    cfg = compose_config(["device=cpu"])
    assert validate(cfg).logger == ()  # absent: the dependency-free default
    with pytest.raises(ConfigError, match="logger='comet'.*none, tensorboard"):
        validate(compose_config(["device=cpu", "logger=comet"]))


def test_tensorboard_logger_needs_the_extra(monkeypatch):
    import sys

    cfg = compose_config(["device=cpu", "logger=tensorboard"])
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # as if the extra were not installed
    with pytest.raises(ConfigError, match=r"repcost\[tensorboard\]"):
        validate(cfg)


def test_a_run_with_logger_tensorboard_logs_its_metrics(tmp_path):
    """The engine's metrics records reach TensorBoard with the same steps and values as metrics.jsonl."""
    pytest.importorskip("tensorboard")
    import json

    from omegaconf import OmegaConf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from repcost.train.run import train_run

    cfg = compose_config(["logger=tensorboard", "train.progress=false", "train.phases.0.steps=30",
                          "train.phases.1.steps=0", "train.log_every=10"])
    train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / "r")
    lines = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    acc = EventAccumulator(str(tmp_path / "r" / "tensorboard"))
    acc.Reload()
    events = acc.Scalars("objective")
    assert [e.step for e in events] == [r["step"] for r in lines]
    assert all(math.isclose(e.value, r["objective"], rel_tol=1e-6) for e, r in zip(events, lines))
