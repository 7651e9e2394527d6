"""`repcost-train`: the Hydra app that trains one model (or a sweep of them with -m)."""

from __future__ import annotations

import atexit
import gc
import logging
import sys
from importlib.metadata import version
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.types import RunMode
from hydra_plugins.repcost_stacked_launcher.stacked_launcher import StackedLauncher  # and its config schema
from omegaconf import DictConfig, OmegaConf

from ..config.compose import store_schema_defaults  # (and the ${repcost_job_dir:} resolver)
from ..errors import FatalError, RepcostError
from ..paths import CONFIG_DIR
from ..provenance import repcost_version
from ..renamed import override
from ..startup import forget_refused_run, startup_guard
from ..train.preempt import Interrupted

from ..config.messages import clean_exit
from .train_args import check_argv, help_text

# hydra/launcher=stacked, registered by hand too (Hydra's documented Plugins.register): Hydra's plugin scan lists
# hydra_plugins.* with pkgutil, which cannot see into an editable install
Plugins.instance().register(StackedLauncher)


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="config")
def _app(cfg: DictConfig):
    from ..train.job import job_failed, run_hydra_jobs  # torch and training load here, not for --help

    try:
        out = run_hydra_jobs([(cfg, HydraConfig.instance().cfg)])[0]
        if isinstance(out, Exception):
            raise out
        return out
    except Exception as e:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            return job_failed(e, cfg, HydraConfig.instance().cfg)
        if isinstance(e, RepcostError):  # a FatalError passes Hydra, which would print "Error executing job" first
            forget_refused_run()
            raise FatalError(str(e)) from None
        raise


def _resume_argv(argv: list[str]) -> list[str]:
    """`--resume RUN_DIR [more overrides]` -> the run's saved overrides plus hydra.run.dir=RUN_DIR."""
    if len(argv) < 2:
        raise RepcostError("--resume needs a run directory")
    run_dir = Path(argv[1])
    saved = run_dir / ".hydra" / "overrides.yaml"
    if not saved.exists() and run_dir.is_dir() and any(run_dir.glob("*.log")):
        raise RepcostError(f"--resume {run_dir}: no run was set up there (its start was interrupted before the "
                           "config was saved); relaunch the original command")
    if not saved.exists():
        raise RepcostError(f"--resume {run_dir}: not a run directory (no .hydra/overrides.yaml)")
    overrides = [override(str(o)) for o in OmegaConf.load(saved) if not str(o).startswith("hydra.run.dir=")]
    return [*overrides, *argv[2:], f"hydra.run.dir={quoted(str(run_dir.resolve()))}"]


def quoted(value: str) -> str:
    """An override value quoted for Hydra's grammar (a sweep job's directory holds '=' and ',')."""
    return "'" + value.replace("'", "\\'") + "'"


def _import_torch() -> None:
    """Import torch out of the cyclic garbage collector's reach: collected as usual, the ~10^5 long-lived objects of
    its import cost every later collection of a run, its last one at exit included (~0.7 s of a demo run). A
    process that has torch already (a notebook, a test) is left as it is."""
    if "torch" in sys.modules:
        return
    enabled = gc.isenabled()
    gc.disable()
    import torch  # noqa: F401

    if enabled:
        gc.enable()
    gc.freeze()
    atexit.register(gc.freeze)  # what the run made since is not visited at exit either


def main() -> None:
    """Console entry point for repcost-train (`repcost-train --resume RUN_DIR` resumes a run)."""
    logging.captureWarnings(True)  # torch/numpy/Hydra warnings go to the run's train.log (configs/hydra/job_logging/repcost.yaml)
    try:
        with clean_exit("repcost-train"), startup_guard():  # stop signals handled before any directory exists
            if sys.argv[1:2] == ["--resume"]:
                sys.argv = [sys.argv[0], *_resume_argv(sys.argv[1:])]
            options = check_argv(sys.argv[1:])
            if options.help:
                print(help_text(options.config_dir))
                return
            if options.version:
                print(f"repcost-train {repcost_version()} (Hydra {version('hydra-core')})")
                return
            _import_torch()
            store_schema_defaults()  # model=<name>, data=<name> and the analysis defaults, from the schemas
            _app()
    except KeyboardInterrupt as e:  # Ctrl-C: after a run's checkpoint (its line is out), or before/after training
        if not isinstance(e, Interrupted):
            print("repcost-train: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    sys.exit(main())
