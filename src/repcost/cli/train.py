"""`repcost-train`: the Hydra app that trains one model (or a sweep of them with -m)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from ..config import validate
from ..errors import RepcostError
from ..paths import CONFIG_DIR
from ..train.run import run_training
from . import resolvers  # noqa: F401  (registers ${repcost_uid:})
from .hydra_errors import clean_exit

log = logging.getLogger("repcost")


def run_config(cfg: DictConfig) -> dict:
    """Validate a composed config (no hydra node needed) and train it in Hydra's output dir."""
    spec = validate(cfg)
    run_cfg = OmegaConf.to_container(cfg, resolve=True)
    run_cfg.pop("hydra", None)
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    summary = run_training(spec, run_cfg, run_dir)
    _report(summary, run_dir)
    return summary


def _report(summary: dict, run_dir: Path) -> None:
    if summary.get("status") != "finished":
        print(f"run {summary.get('status')} at step {summary.get('steps')}: {run_dir}")
        return
    keys = ("train_loss", "test_loss", "objective", "param_sq_norm", "cost", "steps", "stop_reason", "wall_time_s")
    parts = [f"{k}={summary[k]:.6g}" if isinstance(summary[k], float) else f"{k}={summary[k]}"
             for k in keys if k in summary]
    print(f"run finished: {run_dir}\n  " + "  ".join(parts))


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="config")
def _app(cfg: DictConfig):
    try:
        return run_config(cfg)
    except RepcostError as e:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise  # the sweep records the failed job and goes on with the others
        print(f"repcost-train: error: {e}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    """Console entry point for repcost-train."""
    with clean_exit("repcost-train"):
        _app()


if __name__ == "__main__":
    sys.exit(main())
