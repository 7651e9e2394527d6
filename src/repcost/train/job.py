"""A Hydra job as a run: its config validated, its directory and `.hydra/` files, its failure record, its report.

`repcost-train` (one job) and the stacked launcher (a group of jobs in one process) share `run_hydra_jobs`, so a
job behaves the same whichever way it was launched.
"""

from __future__ import annotations

import logging
import shlex
import signal
import sys
import traceback
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from .. import startup, threads
from ..analysis.hooks import descriptions
from ..config import validate
from ..config.schema import RunSpec
from ..errors import RepcostError
from ..identity import run_hash
from ..provenance import git_commit, repcost_version, run_plugin_sources
from ..rundir import RunDir, append_line
from ..sweep import REFUSED
from .certify import describe as describe_certified
from .preempt import Interrupted
from .run import failure_message, train_runs

log = logging.getLogger("repcost")


def launch_concurrency(hc: DictConfig) -> int:
    """How many jobs of this launch run at once: a parallel/stacked launcher's `n_jobs` (-1: one per core), else 1."""
    n_jobs = OmegaConf.select(hc, "launcher.n_jobs", default=None) if hc.mode == RunMode.MULTIRUN else None
    if not isinstance(n_jobs, int) or n_jobs == 0:
        return 1
    return threads.cores_available() if n_jobs < 0 else n_jobs


def prepare(cfg: DictConfig) -> tuple[RunSpec, dict, Path, str]:
    """(spec, resolved run config, run dir, `on_stale`) of the job whose Hydra config is current.

    A run directory named by the job's overrides (a sweep job's, or a single run's default
    `outputs/runs/<overrides>`) moves a finished run of another config aside, so an edited preset lands on its
    old run; a directory the user named (`hydra.run.dir`, `--resume`) refuses it.
    """
    hc = HydraConfig.get()
    spec = validate(cfg)
    # the sha256 of each plugin module the run uses is part of its identity (a plugin edit makes a finished run
    # stale); a run without plugins gets no key and keeps its identity
    run_cfg, sources = OmegaConf.to_container(cfg, resolve=True), run_plugin_sources(spec)
    if sources or "plugin_sources" in run_cfg:
        run_cfg["plugin_sources"] = sources
    logging.captureWarnings(True)  # library warnings go to train.log only (configs/hydra/job_logging/repcost.yaml)
    header = logging.getLogger("repcost.file")  # the first lines of train.log (not the console)
    header.info("command: %s", shlex.join(["repcost-train", *sys.argv[1:]]))
    header.info("repcost_version=%s git_commit=%s config_hash=%s", repcost_version(), git_commit(), run_hash(run_cfg))
    multirun = hc.mode == RunMode.MULTIRUN
    if multirun and spec.device == "cuda" and torch.cuda.device_count() > 1:  # the CPU cores: repcost.threads
        spec.device = f"cuda:{hc.job.num % torch.cuda.device_count()}"
    n, why = threads.apply(spec.threads, concurrency=launch_concurrency(hc))
    log.debug("torch threads: %d (%s)", n, why)
    by_overrides = multirun or "${repcost_job_dir:" in str(OmegaConf.to_container(hc.run, resolve=False)["dir"])
    return spec, run_cfg, Path(hc.runtime.output_dir), "move" if by_overrides else "refuse"


def done(summary: dict, run_dir: Path) -> dict:
    """A job's return value, its outcome logged: a reused or unfinished run in one line, a finished one in a few (its
    scalars, what its analyses say of it, its figures).

    A run stopped by Ctrl-C: one line, then `Interrupted` ends the command (a sweep's later jobs too)."""
    if summary.pop("reused", False):
        log.info("already finished (force=true moves it aside and reruns): %s", run_dir)
        return summary
    if summary.get("status") == "preempted" and summary.get("signal") == signal.SIGINT:
        log.warning("interrupted at step %s of %s; relaunch the same command to resume", summary["steps"],
                    summary["total_steps"])
        raise Interrupted
    if summary.get("status") != "finished":
        log.info("run %s at step %s: %s (relaunch to resume)", summary.get("status"), summary.get("steps"), run_dir)
        return summary
    keys = ("train_loss", "test_loss", "objective", "param_sq_norm", "cost", "steps", "stop_reason", "wall_time_s")
    parts = [f"{k}={summary[k]:.6g}" if isinstance(summary[k], float) else f"{k}={summary[k]}"
             for k in keys if k in summary]
    log.info("run finished: %s\n  %s", run_dir, "  ".join(parts))
    # the certificate and any analysis that describes itself, then certified stopping's verdict
    for line in filter(None, [*descriptions(summary), describe_certified(summary)]):
        log.info("  %s", line)
    if "members_agreeing" in summary:
        log.info("  restarts: %d of %d end within 1 %% of the best objective (agreement across seeds%s)",
                 summary["members_agreeing"], summary["ensemble_size"],
                 "" if "certify.duality_gap_rel" in summary else "; not a global-minimum certificate")
    for fig in sorted((run_dir / "figures").glob("*.png")):
        log.info("  figure: %s", fig)
    return summary


def run_hydra_jobs(jobs: Sequence[tuple[DictConfig, DictConfig]]) -> list[dict | Exception]:
    """Hydra jobs, each (task config, Hydra config): validated, trained in one process (`run.train_runs`, stacked
    when several) and reported. Returns per job its return value or the exception it ends with (a config that does
    not validate, a failed run): `repcost-train`'s task function passes one job, the stacked launcher a group."""
    out: list[dict | Exception | None] = [None] * len(jobs)
    ready = []  # (index, spec, run config, run dir)
    try:
        for i, (cfg, hydra_cfg) in enumerate(jobs):
            HydraConfig.instance().cfg = hydra_cfg
            try:
                spec, run_cfg, run_dir, on_stale = prepare(cfg)
                ready.append((i, spec, run_cfg, run_dir))
            except Exception as e:
                out[i] = e
        if ready:
            idx, specs, run_cfgs, run_dirs = zip(*ready)
            results = train_runs(specs, run_cfgs, run_dirs, force=bool(jobs[idx[0]][0].get("force", False)),
                                 on_stale=on_stale, hydra_cfgs=[jobs[i][1] for i in idx])
            for i, run_dir, r in zip(idx, run_dirs, results):
                out[i] = r if isinstance(r, Exception) else done(r, run_dir)
        return out  # type: ignore[return-value]
    finally:
        startup.job_ended()


def job_failed(e: Exception, cfg: DictConfig, hydra_cfg: DictConfig) -> None:
    """A sweep job's failure: recorded in its directory (error.txt, traceback.txt for a bug), one stderr line;
    the other jobs go on."""
    hc = hydra_cfg.hydra
    run_dir = RunDir(Path(hc.runtime.output_dir))
    msg = failure_message(e)
    line = " ".join(msg.split())
    # never touch a live run's directory (another launch runs it), nor mark a finished run failed (e.g. a bad
    # override on relaunch): the sweep's tally reads that refusal from REFUSED
    live = "in use by a running repcost process" in msg
    if not live and run_dir.finished_hash() is not None:
        with suppress(RepcostError):
            sweep = Path(hc.sweep.dir).resolve()
            append_line(sweep / REFUSED, f"{run_dir.path.resolve().relative_to(sweep)}\t{line}")
    elif not live:
        with suppress(RepcostError):  # the directory itself cannot be written: the message below still says why
            if not run_dir.file(".hydra/overrides.yaml").exists():  # failed before the run started
                run_dir.write_config(cfg, hydra_cfg)
            run_dir.record_failure(msg)
            if not isinstance(e, RepcostError):
                run_dir.write_bytes("traceback.txt", "".join(traceback.format_exception(e)).encode())
    print(f"job failed: {run_dir.path}: {line}", file=sys.stderr)
