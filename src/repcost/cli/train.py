"""`repcost-train`: the Hydra app that trains one model (or a sweep of them with -m)."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from ..config import validate
from ..errors import RepcostError
from ..paths import CONFIG_DIR
from ..runio import config_hash
from ..train.run import SUMMARY, clear_run_dir, is_finished, record_failure, run_training
from . import resolvers  # noqa: F401  (registers ${repcost_uid:} and ${repcost_job_dir:})
from .hydra_errors import clean_exit

log = logging.getLogger("repcost")

NOT_HASHED = ("name", "force")  # keys that do not change what a run computes (nor do train.progress and
# train.checkpoint_every: a resumed run matches an unbroken one)
# keys added after runs were made: hashed only away from these values, so older run dirs still match
HASHED_IF_NOT = {"data": {"bottleneck": "linear", "bottleneck_shift": 0.0}, "phase": {"lam_factor": 1.0}}


def _drop_defaults(section: dict, defaults: dict) -> dict:
    """`section` without the keys whose value is their entry in `defaults`."""
    return {k: v for k, v in section.items() if not (k in defaults and v == defaults[k])}


def identity(run_cfg: dict) -> dict:
    """The part of a run config that defines its result (hashed to match run directories)."""
    d = {k: v for k, v in run_cfg.items() if k not in NOT_HASHED}
    d["train"] = {k: v for k, v in d.get("train", {}).items() if k != "progress"}
    if "checkpoint_every" in d["train"]:  # hashed at its default, so run dirs made before it was ignored still match
        d["train"]["checkpoint_every"] = 0
    if "phases" in d["train"]:
        d["train"]["phases"] = [_drop_defaults(ph, HASHED_IF_NOT["phase"]) for ph in d["train"]["phases"]]
    if isinstance(d.get("data"), dict):
        d["data"] = _drop_defaults(d["data"], HASHED_IF_NOT["data"])
    return d


def _place_sweep_job(spec) -> None:
    """In a multirun: share the CPU cores among parallel jobs, spread jobs over the GPUs."""
    hc = HydraConfig.get()
    n_jobs = OmegaConf.select(hc, "launcher.n_jobs", default=None)
    if n_jobs is not None:
        n = os.cpu_count() or 1
        n_jobs = n if n_jobs < 0 else n_jobs
        torch.set_num_threads(max(1, n // max(1, min(n_jobs, n))))
    if spec.device == "cuda" and torch.cuda.device_count() > 1:
        spec.device = f"cuda:{hc.job.num % torch.cuda.device_count()}"


def run_config(cfg: DictConfig) -> dict:
    """Validate a composed config and train it in Hydra's output dir (skip if finished, else resume or start fresh)."""
    spec = validate(cfg)
    run_cfg = OmegaConf.to_container(cfg, resolve=True)
    run_cfg.pop("hydra", None)
    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    multirun = hc.mode == RunMode.MULTIRUN
    if multirun:
        _place_sweep_job(spec)
    chash = config_hash(identity(run_cfg))
    if cfg.get("force", False):
        clear_run_dir(run_dir)
    elif is_finished(run_dir, chash):
        import json
        print(f"already finished (force=true reruns): {run_dir}")
        return json.loads((run_dir / SUMMARY).read_text())
    summary = run_training(spec, run_cfg, run_dir, chash=chash)
    _report(summary, run_dir)
    return summary


def _report(summary: dict, run_dir: Path) -> None:
    if summary.get("status") != "finished":
        print(f"run {summary.get('status')} at step {summary.get('steps')}: {run_dir} (relaunch to resume)")
        return
    keys = ("train_loss", "test_loss", "objective", "param_sq_norm", "cost", "steps", "stop_reason", "wall_time_s")
    parts = [f"{k}={summary[k]:.6g}" if isinstance(summary[k], float) else f"{k}={summary[k]}"
             for k in keys if k in summary]
    print(f"run finished: {run_dir}\n  " + "  ".join(parts))
    for fig in sorted((run_dir / "figures").glob("*.png")):
        print(f"  figure: {fig}")


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="config")
def _app(cfg: DictConfig):
    try:
        return run_config(cfg)
    except Exception as e:
        hc = HydraConfig.get()
        if hc.mode != RunMode.MULTIRUN:
            if isinstance(e, RepcostError):
                print(f"repcost-train: error: {e}", file=sys.stderr)
                sys.exit(2)
            raise
        # In a sweep a failed job is recorded in its directory; the other jobs go on.
        run_dir = Path(hc.runtime.output_dir)
        msg = f"{e}" if isinstance(e, RepcostError) else f"{e.__class__.__name__}: {e}"
        record_failure(run_dir, msg)
        if not isinstance(e, RepcostError):
            (run_dir / "traceback.txt").write_text(traceback.format_exc())
        print(f"job failed: {run_dir}: {' '.join(msg.split())}", file=sys.stderr)
        return {"status": "failed", "error": msg}


def _resume_argv(argv: list[str]) -> list[str]:
    """`--resume RUN_DIR [more overrides]` -> the run's saved overrides plus hydra.run.dir=RUN_DIR."""
    run_dir = Path(argv[1])
    saved = run_dir / ".hydra" / "overrides.yaml"
    if not saved.exists():
        raise RepcostError(f"--resume {run_dir}: not a run directory (no .hydra/overrides.yaml)")
    overrides = [o for o in OmegaConf.load(saved) if not str(o).startswith("hydra.run.dir=")]
    return [*map(str, overrides), *argv[2:], f"hydra.run.dir={run_dir.resolve()}"]


def main() -> None:
    """Console entry point for repcost-train (`repcost-train --resume RUN_DIR` resumes a run)."""
    with clean_exit("repcost-train"):
        if len(sys.argv) > 2 and sys.argv[1] == "--resume":
            sys.argv = [sys.argv[0], *_resume_argv(sys.argv[1:])]
        elif len(sys.argv) == 2 and sys.argv[1] == "--resume":
            raise RepcostError("--resume needs a run directory")
        _app()


if __name__ == "__main__":
    sys.exit(main())
