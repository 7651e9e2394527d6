"""One run end to end: data, model, training, outputs (DESIGN.md 'Runs and outputs')."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Optional

import torch

from ..config.schema import RunSpec
from ..data import load_data
from ..errors import RepcostError
from ..models import build_model
from ..runio import atomic_torch_save, atomic_write_bytes, atomic_write_json, config_hash, git_commit, json_line
from .loop import Trainer
from .preempt import StopFlag, stop_on_signals

log = logging.getLogger("repcost")

CHECKPOINT, SUMMARY, METRICS, FINISHED, ERROR = "checkpoint.pt", "summary.json", "metrics.jsonl", "FINISHED", "error.txt"
RUN_FILES = (CHECKPOINT, SUMMARY, METRICS, FINISHED, ERROR)


def is_finished(run_dir: Path, chash: str) -> bool:
    """Whether `run_dir` holds a finished run of this config (its FINISHED marker carries hash `chash`)."""
    f = Path(run_dir) / FINISHED
    return f.exists() and f.read_text().strip() == chash


def resume_or_clear(run_dir: Path, chash: str) -> Optional[dict]:
    """This config's checkpoint in `run_dir` to resume from; else None, after clearing what is there.

    Only an unfinished, not failed run of the same config (hash `chash`) is resumed. Outputs of another
    config (a preset edited since), of a failed or finished attempt, or an unreadable checkpoint are
    removed, so the run starts fresh.
    """
    run_dir = Path(run_dir)
    ckpt = None
    if (run_dir / CHECKPOINT).exists() and not (run_dir / FINISHED).exists() and not (run_dir / ERROR).exists():
        try:
            ckpt = load_checkpoint(run_dir / CHECKPOINT)
        except RepcostError:  # unreadable (e.g. killed mid-write before atomic saves): start over
            ckpt = None
    if ckpt is not None and ckpt.get("config_hash") == chash:
        return ckpt
    clear_run_dir(run_dir)
    return None


def clear_run_dir(run_dir: Path) -> None:
    """Remove a previous attempt's outputs (checkpoint, metrics, summary, markers); keep .hydra/."""
    for f in RUN_FILES:
        (Path(run_dir) / f).unlink(missing_ok=True)


def record_failure(run_dir: Path, message: str) -> None:
    """Write the one-line error of a failed run to error.txt (read by repcost-collect)."""
    from ..runio import atomic_write_bytes
    atomic_write_bytes(Path(run_dir) / ERROR, (" ".join(message.split()) + "\n").encode())


class MetricsWriter:
    """Appends one JSON line per logged step to metrics.jsonl, flushed at once."""

    def __init__(self, path: Path, keep_before: int = 0):
        self.path = path
        keep = []
        if keep_before and path.exists():  # resuming: drop lines logged after the checkpoint
            keep = [ln for ln in path.read_text().splitlines() if ln and json.loads(ln)["step"] < keep_before]
        path.write_text("".join(k + "\n" for k in keep))
        self.f = open(path, "a")

    def __call__(self, rec: dict) -> None:
        self.f.write(json_line(rec) + "\n")
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def run_resumable(trainer, state: Optional[dict], wall_before: float, metrics: "MetricsWriter", run_dir: Path):
    """Restore `state` (if any) into a Trainer/EnsembleTrainer, run it with SIGTERM/SIGUSR1 stopping it; returns run()'s result."""
    if state is not None:
        trainer.load_state_dict(state)
        log.info("resuming %s from step %d (%.0f s trained before)", run_dir, trainer.pos.step, wall_before)
    try:
        with stop_on_signals(trainer.stop_flag):
            return trainer.run()
    finally:
        metrics.close()


def load_checkpoint(path: Path) -> dict:
    """Load a checkpoint written by repcost (weights_only=True: plain tensors and containers)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or foreign file
        raise RepcostError(f"cannot read checkpoint {path}: {e.__class__.__name__}: {str(e).splitlines()[0]}")


def _plot_fit_1d(model, data, path: Path, summary: dict) -> None:
    """figures/fit.png: the learned 1-D function over the data range (and a margin) with the points."""
    import matplotlib.pyplot as plt

    from ..plots.fit_1d import fit_1d_figure

    x = data.x_train[:, 0].detach().cpu().double()
    lo, hi = float(x.min()), float(x.max())
    pad = 0.25 * (hi - lo or 1.0)
    grid = torch.linspace(lo - pad, hi + pad, 600, dtype=data.x_train.dtype, device=data.x_train.device)
    with torch.no_grad():
        f = model(grid[:, None])[:, 0].cpu().double().numpy()
    fig = fit_1d_figure(grid.cpu().double().numpy(), f, x.numpy(), data.y_train[:, 0].cpu().double().numpy(),
                        f"{model.family} L={model.depth}: train loss {summary['train_loss']:.3g}, "
                        f"cost {summary['cost']:.4g}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_summary(trainer, result, wall: float, spec: RunSpec, seed: int, chash: str, commit: str,
                data_name: str) -> dict:
    """summary.json of one trained model: final objective terms, cost, stop reason, provenance."""
    model, ev = trainer.model, trainer.evaluate()
    return {
        **ev,
        "param_sq_norm_per_depth": ev["param_sq_norm"] / model.depth,
        "cost": float(model.cost().detach()),
        "depth": model.depth,
        "steps": trainer.pos.step,
        "stop_reason": result.stop_reason,
        "status": result.status,
        "message": result.message,
        "wall_time_s": wall,
        "device": str(torch.device(spec.device)),
        "dtype": spec.dtype,
        "seed": seed,
        "git_commit": commit,
        "config_hash": chash,
        "model": model.family,
        "data": data_name,
    }


def run_training(spec: RunSpec, cfg_dict: dict, run_dir: Path, stop_flag: Optional[StopFlag] = None,
                 chash: Optional[str] = None) -> dict:
    """Train the run described by `spec` in `run_dir` (resuming a checkpoint left there); returns the summary."""
    if spec.train.ensemble_size > 1:  # several seeds as one stacked model
        from .ensemble import run_ensemble
        return run_ensemble(spec, cfg_dict, run_dir, stop_flag, chash)
    from ..analysis.hooks import AnalysisRunner  # analysis builds on models; import lazily

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    chash = chash or config_hash(cfg_dict)
    t_start = time.perf_counter()
    device, dtype = torch.device(spec.device), spec.torch_dtype

    data = load_data(spec.data)
    if spec.train.loss == "cross_entropy" and data.task != "classification":
        raise RepcostError(f"train.loss=cross_entropy needs a classification dataset; data={data.name} is regression")
    model = build_model(spec.model, data.d_in, data.d_out, spec.seed).to(device=device, dtype=dtype)
    data = data.to(dtype, device)
    analysis = AnalysisRunner(spec.analysis, model, data, run_dir)

    ckpt_path = run_dir / CHECKPOINT
    resume = resume_or_clear(run_dir, chash)
    metrics = MetricsWriter(run_dir / METRICS, keep_before=resume["trainer"]["position"]["step"] if resume else 0)

    def save(trainer_state: dict, status: str) -> None:
        atomic_torch_save(ckpt_path, {"trainer": trainer_state, "config_hash": chash, "status": status,
                                      "family": model.family, "config": cfg_dict})

    trainer = Trainer(model, data, spec.train, spec.seed, on_log=metrics,
                      on_checkpoint=lambda st: save(st, "running"),
                      hook=analysis.periodic if analysis.enabled_periodic else None,
                      hook_every=spec.analysis.every, stop_flag=stop_flag)
    wall_before = float(resume.get("wall_time_s", 0.0)) if resume is not None else 0.0
    result = run_resumable(trainer, resume["trainer"] if resume is not None else None, wall_before, metrics, run_dir)

    status = result.status
    state = trainer.state_dict()
    wall = wall_before + time.perf_counter() - t_start
    ckpt = {"trainer": state, "config_hash": chash, "status": status, "family": model.family,
            "config": cfg_dict, "wall_time_s": wall}
    atomic_torch_save(ckpt_path, ckpt)
    if status == "preempted":
        log.warning("preempted (%s) at step %d; checkpoint saved, relaunch to resume", result.message, result.steps)
        return {"status": status, "steps": result.steps}

    summary = run_summary(trainer, result, wall, spec, spec.seed, chash, git_commit(), data.name)
    if status == "finished":
        summary.update(analysis.final(model))
        if data.task == "regression" and data.d_in == 1 and data.d_out == 1:
            _plot_fit_1d(model, data, run_dir / "figures" / "fit.png", summary)
    atomic_write_json(run_dir / SUMMARY, summary)
    if status == "failed":
        raise RepcostError(f"run failed: {result.message}; summary and checkpoint in {run_dir}")
    atomic_write_bytes(run_dir / FINISHED, (chash + "\n").encode())
    return summary
