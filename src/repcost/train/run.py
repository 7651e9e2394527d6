"""One run end to end: data, model, training, outputs (DESIGN.md 'Runs and outputs')."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import torch

from ..config.schema import RunSpec
from ..data import load_data
from ..errors import RepcostError
from ..models import build_model
from ..runio import atomic_torch_save, atomic_write_json, config_hash, git_commit, json_line
from .loop import Trainer
from .preempt import StopFlag, stop_on_signals

log = logging.getLogger("repcost")

CHECKPOINT, SUMMARY, METRICS = "checkpoint.pt", "summary.json", "metrics.jsonl"


class MetricsWriter:
    """Appends one JSON line per logged step to metrics.jsonl, flushed at once."""

    def __init__(self, path: Path, truncate_after: Optional[int] = None):
        self.path = path
        if truncate_after is not None and path.exists():  # resuming: drop lines past the checkpoint
            import json
            keep = [ln for ln in path.read_text().splitlines() if ln and json.loads(ln)["step"] < truncate_after]
            path.write_text("".join(k + "\n" for k in keep))
        self.f = open(path, "a")

    def __call__(self, rec: dict) -> None:
        self.f.write(json_line(rec) + "\n")
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def load_checkpoint(path: Path) -> dict:
    """Load a checkpoint written by repcost (weights_only=True: plain tensors and containers)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or foreign file
        raise RepcostError(f"cannot read checkpoint {path}: {e.__class__.__name__}: {str(e).splitlines()[0]}")


def run_training(spec: RunSpec, cfg_dict: dict, run_dir: Path, stop_flag: Optional[StopFlag] = None) -> dict:
    """Train the run described by `spec` in `run_dir` (resuming a checkpoint left there); returns the summary."""
    from ..analysis.hooks import AnalysisRunner  # analysis builds on models; import lazily

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    chash = config_hash(cfg_dict)
    t_start = time.perf_counter()
    device, dtype = torch.device(spec.device), spec.torch_dtype

    data = load_data(spec.data)
    if spec.train.loss == "cross_entropy" and data.task != "classification":
        raise RepcostError(f"train.loss=cross_entropy needs a classification dataset; data={data.name} is regression")
    model = build_model(spec.model, data.d_in, data.d_out, spec.seed).to(device=device, dtype=dtype)
    data = data.to(dtype, device)
    analysis = AnalysisRunner(spec.analysis, model, data, run_dir)

    ckpt_path = run_dir / CHECKPOINT
    resume = None
    if ckpt_path.exists():
        resume = load_checkpoint(ckpt_path)
        if resume.get("config_hash") != chash:
            raise RepcostError(f"{run_dir} holds a checkpoint of a different config (hash "
                               f"{resume.get('config_hash')} != {chash}); use a fresh run directory")
    metrics = MetricsWriter(run_dir / METRICS, truncate_after=resume["trainer"]["position"]["step"] if resume else None)

    def save(trainer_state: dict, status: str) -> None:
        atomic_torch_save(ckpt_path, {"trainer": trainer_state, "config_hash": chash, "status": status,
                                      "family": model.family, "config": cfg_dict})

    trainer = Trainer(model, data, spec.train, spec.seed, on_log=metrics,
                      on_checkpoint=lambda st: save(st, "running"),
                      hook=analysis.periodic if analysis.enabled_periodic else None,
                      hook_every=spec.analysis.every, stop_flag=stop_flag)
    wall_before = 0.0
    if resume is not None:
        trainer.load_state_dict(resume["trainer"])
        wall_before = float(resume.get("wall_time_s", 0.0))
        log.info("resuming %s from step %d", run_dir, trainer.pos.step)
    try:
        with stop_on_signals(trainer.stop_flag):
            result = trainer.run()
    finally:
        metrics.close()

    status = {"preempted": "preempted", "non_finite": "failed"}.get(result.stop_reason, "finished")
    state = trainer.state_dict()
    wall = wall_before + time.perf_counter() - t_start
    ckpt = {"trainer": state, "config_hash": chash, "status": status, "family": model.family,
            "config": cfg_dict, "wall_time_s": wall}
    atomic_torch_save(ckpt_path, ckpt)
    if status == "preempted":
        log.warning("preempted (%s) at step %d; checkpoint saved, relaunch to resume", result.message, result.steps)
        return {"status": status, "steps": result.steps}

    ev = trainer.evaluate()
    summary = {
        **ev,
        "param_sq_norm_per_depth": ev["param_sq_norm"] / model.depth,
        "cost": float(model.cost().detach()),
        "depth": model.depth,
        "steps": trainer.pos.step,
        "stop_reason": result.stop_reason,
        "status": status,
        "message": result.message,
        "wall_time_s": wall,
        "device": str(device),
        "dtype": spec.dtype,
        "seed": spec.seed,
        "git_commit": git_commit(),
        "config_hash": chash,
        "model": model.family,
        "data": data.name,
    }
    if status == "finished":
        summary.update(analysis.final(model))
    atomic_write_json(run_dir / SUMMARY, summary)
    if status == "failed":
        raise RepcostError(f"run failed: {result.message}; summary and checkpoint in {run_dir}")
    return summary
