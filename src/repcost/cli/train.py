"""`repcost-train`: the Hydra app that trains one model (or a sweep of them with -m)."""

from __future__ import annotations

import logging
import math
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from ..config import validate
from ..errors import RepcostError
from ..paths import CONFIG_DIR
from ..rundir import RunDir
from ..train.run import run_training
from . import resolvers  # noqa: F401  (registers ${repcost_uid:} and ${repcost_job_dir:})

try:  # hydra/launcher=stacked, registered by hand too (Hydra's documented Plugins.register): Hydra's
    # plugin scan lists hydra_plugins.* with pkgutil, which cannot see into an editable install
    from hydra.core.plugins import Plugins

    from hydra_plugins.repcost_stacked_launcher import config as _stacked_config  # noqa: F401 (its schema)
    from hydra_plugins.repcost_stacked_launcher.stacked_launcher import StackedLauncher

    Plugins.instance().register(StackedLauncher)
except ImportError:  # pragma: no cover - a partial install without the plugin
    pass
from .hydra_errors import clean_exit

log = logging.getLogger("repcost")


def _place_sweep_job(spec, hc) -> None:
    """In a multirun: share the CPU cores among parallel jobs, spread jobs over the GPUs."""
    n_jobs = OmegaConf.select(hc, "launcher.n_jobs", default=None)
    if n_jobs is not None:
        n = os.cpu_count() or 1
        n_jobs = n if n_jobs < 0 else n_jobs
        torch.set_num_threads(max(1, n // max(1, min(n_jobs, n))))
    if spec.device == "cuda" and torch.cuda.device_count() > 1:
        spec.device = f"cuda:{hc.job.num % torch.cuda.device_count()}"


def _group_options(hc, group: str) -> list[str]:
    """Options of a config group in every source of this run's search path (repcost's, --config-dir, hydra.searchpath)."""
    import importlib.resources

    names: set[str] = set()
    for src in hc.runtime.config_sources:
        if src.schema == "file":
            folder = Path(src.path) / group
            names |= {p.stem for p in folder.glob("*.yaml")} if folder.is_dir() else set()
        elif src.schema == "pkg":
            try:
                folder = importlib.resources.files(src.path.replace("/", ".")) / group
                names |= {p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")}
            except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
                pass
    return sorted(names)


def _check_experiment(hc) -> None:
    """`experiment=<name>` must name a preset: Hydra's optional default would silently skip a typo."""
    choice = hc.runtime.choices.get("experiment")
    if choice in (None, "null"):
        return
    options = _group_options(hc, "experiment")
    if choice not in options:
        import difflib
        near = difflib.get_close_matches(str(choice), options, n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else f"; presets: {', '.join(options)}"
        raise RepcostError(f"unknown experiment '{choice}'{hint}")


def _write_hydra_files(cfg: DictConfig, hydra_cfg: DictConfig) -> Callable[[RunDir], None]:
    """Writes .hydra/ (config, hydra config, overrides) once the run dir is ours: repcost owns the run
    directory, so a run that is moved aside keeps its own .hydra/ (Hydra's own copy is switched off).
    `hydra_cfg` is the job's `HydraConfig.instance().cfg` (a stacked group holds several jobs' at once)."""
    hc = hydra_cfg.hydra

    def write(rd: RunDir) -> None:
        rd.write_bytes(".hydra/config.yaml", OmegaConf.to_yaml(cfg).encode())
        rd.write_bytes(".hydra/hydra.yaml", OmegaConf.to_yaml(hydra_cfg).encode())
        rd.write_bytes(".hydra/overrides.yaml", OmegaConf.to_yaml(OmegaConf.create(list(hc.overrides.task))).encode())
    return write


def _prepare(cfg: DictConfig):
    """(spec, resolved run config, run dir, multirun) of the job whose Hydra config is current."""
    hc = HydraConfig.get()
    _check_experiment(hc)
    spec = validate(cfg)
    run_cfg = OmegaConf.to_container(cfg, resolve=True)
    run_cfg.pop("hydra", None)
    multirun = hc.mode == RunMode.MULTIRUN
    if multirun:
        _place_sweep_job(spec, hc)
    return spec, run_cfg, Path(hc.runtime.output_dir), multirun


def _done(summary: dict, run_dir: Path) -> dict:
    if summary.pop("reused", False):
        log.info("already finished (force=true moves it aside and reruns): %s", run_dir)
    else:
        _report(summary, run_dir)
    return summary


def run_config(cfg: DictConfig) -> dict:
    """Validate a composed config and train it in Hydra's output dir (skip if finished, else resume or start fresh)."""
    spec, run_cfg, run_dir, multirun = _prepare(cfg)
    summary = run_training(spec, run_cfg, run_dir, force=bool(cfg.get("force", False)),
                           on_stale="move" if multirun else "refuse",
                           before_start=_write_hydra_files(cfg, HydraConfig.instance().cfg))
    return _done(summary, run_dir)


def stack_key_of_job(config: DictConfig) -> str | None:
    """The stacked launcher's grouping key of a composed sweep job (hydra node included): jobs with equal
    keys train as one stacked process. None: the job runs alone (e.g. its config does not validate, so it
    fails exactly as an unstacked job does)."""
    from ..train.stacked import stack_key

    if config.hydra.job.chdir:  # jobs that change into their own directory cannot share a process
        return None
    HydraConfig.instance().set_config(config)
    try:
        _check_experiment(HydraConfig.get())
        cfg = _task_config(config)
        validate(cfg)
        run_cfg = OmegaConf.to_container(cfg, resolve=True)
    except Exception:  # any problem shows when the job runs alone
        return None
    return stack_key(run_cfg)


def _task_config(config: DictConfig) -> DictConfig:
    """A job's config without its hydra node (what Hydra passes the task function)."""
    import copy

    from omegaconf import open_dict, read_write

    task = copy.deepcopy(config)
    with read_write(task), open_dict(task):
        del task["hydra"]
    return task


def run_stacked_jobs(configs: list[DictConfig]) -> list[dict]:
    """The stacked launcher's group: sweep jobs (hydra node included, output dirs set) trained as one stacked
    process (`train.stacked.run_stacked`); each job's directory, report, failure record and return value are
    what `run_config` and `_app` give it alone."""
    from ..train.stacked import run_stacked

    out: list = [None] * len(configs)
    ready = []  # (index, task config, hydra config, spec, run config, run dir)
    for i, config in enumerate(configs):
        HydraConfig.instance().set_config(config)
        cfg = _task_config(config)
        try:
            spec, run_cfg, run_dir, _ = _prepare(cfg)
            ready.append((i, cfg, HydraConfig.instance().cfg, spec, run_cfg, run_dir,
                          _write_hydra_files(cfg, HydraConfig.instance().cfg)))
        except Exception as e:
            out[i] = _job_failed(e, cfg, HydraConfig.instance().cfg)
    if ready:
        HydraConfig.instance().set_config(configs[ready[0][0]])
        try:
            results = run_stacked([r[3] for r in ready], [r[4] for r in ready], [r[5] for r in ready],
                                  force=bool(ready[0][1].get("force", False)), on_stale="move",
                                  before_start=[r[6] for r in ready])
        except RepcostError as e:
            results = [e] * len(ready)
        for (i, cfg, hydra_cfg, _, _, run_dir, _), r in zip(ready, results):
            HydraConfig.instance().cfg = hydra_cfg
            out[i] = _job_failed(r, cfg, hydra_cfg) if isinstance(r, Exception) else _done(r, run_dir)
    return out


def _report(summary: dict, run_dir: Path) -> None:
    if summary.get("status") != "finished":
        log.info("run %s at step %s: %s (relaunch to resume)", summary.get("status"), summary.get("steps"), run_dir)
        return
    keys = ("train_loss", "test_loss", "objective", "param_sq_norm", "cost", "steps", "stop_reason", "wall_time_s")
    parts = [f"{k}={summary[k]:.6g}" if isinstance(summary[k], float) else f"{k}={summary[k]}"
             for k in keys if k in summary]
    log.info("run finished: %s\n  %s", run_dir, "  ".join(parts))
    if "critical_point" in summary:
        clarke = ""
        if "cert.clarke_stationarity" in summary:
            c, n = summary["cert.clarke_stationarity"], summary["cert.kinks"]
            clarke = (f", {c:.3g} over the slopes of {n} kinks" if math.isfinite(c)
                      else f", not computed over the slopes of {n} kinks")
        log.info(f"  critical point: {'yes' if summary['critical_point'] else 'no'} (stationarity "
                 f"{summary['cert.stationarity']:.3g}{clarke}, unit gap {summary.get('cert.unit_gap', 0.0):.3g}; "
                 "docs/ARCHITECTURE.md, Certificate)")
        if "cert.duality_gap_rel" in summary:
            log.info(f"  global minimum: the objective is at most {summary['cert.duality_gap_rel']:.3g} (relative) "
                     "above it (duality gap of the convex 1-D problem; docs/ARCHITECTURE.md, Certificate)")
        if "cert.descent_rel" in summary:
            log.info(f"  descent check: L-BFGS lowers the objective by {summary['cert.descent_rel']:.3g} (relative) "
                     f"in {summary['cert.descent_evals']} evaluations")
    for fig in sorted((run_dir / "figures").glob("*.png")):
        log.info("  figure: %s", fig)


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="config")
def _app(cfg: DictConfig):
    try:
        return run_config(cfg)
    except Exception as e:
        if HydraConfig.get().mode != RunMode.MULTIRUN:
            if isinstance(e, RepcostError):
                print(f"repcost-train: error: {e}", file=sys.stderr)
                sys.exit(2)
            raise
        return _job_failed(e, cfg, HydraConfig.instance().cfg)


def _job_failed(e: Exception, cfg: DictConfig, hydra_cfg: DictConfig) -> dict:
    """A sweep job's failure: recorded in its directory (error.txt, traceback.txt for a bug), one stderr line;
    the other jobs go on."""
    hc = hydra_cfg.hydra
    run_dir = RunDir(Path(hc.runtime.output_dir))
    msg = f"{e}" if isinstance(e, RepcostError) else f"{e.__class__.__name__}: {e}"
    # never touch a live run's directory, nor mark a finished run failed (e.g. a bad override on relaunch)
    if "in use by a running repcost process" not in msg and run_dir.finished_hash() is None:
        try:
            if not run_dir.file(".hydra/overrides.yaml").exists():  # failed before the run started
                _write_hydra_files(cfg, hydra_cfg)(run_dir)
            run_dir.record_failure(msg)
            if not isinstance(e, RepcostError):
                run_dir.write_bytes("traceback.txt", "".join(traceback.format_exception(e)).encode())
        except RepcostError:
            pass  # the directory itself cannot be written: the message below still says why
    print(f"job failed: {run_dir.path}: {' '.join(msg.split())}", file=sys.stderr)
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
