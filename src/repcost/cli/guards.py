"""The Hydra callback that guards and records what Hydra does outside repcost's task function.

* Before Hydra creates a run's or a sweep's directory (`on_run_start`, `on_multirun_start`): the directory is
  checked (`rundir.check_place`): names taken into it are plain names, `hydra.run.dir` is not empty, no run inside a
  sweep root and no sweep inside a run. A refusal is a `FatalError` (Hydra turns a callback's Exception into a
  warning and goes on).
* Each sweep job's outcome is appended to its launch's `<sweep dir>/.sweep_outcomes.<launching pid>` (`on_job_end`
  runs in the job's own process under joblib or submitit, which inherit the launch's environment), and
  `on_multirun_end` (in the launching process) tallies them, so `repcost-train -m` can exit non-zero with one line
  when any job failed; as each job ends, the launch's progress is printed (`sweep: k/n jobs done, elapsed, ETA`).
  Two launches into one sweep at once each count their own jobs.
* A multirun's jobs are recorded as they start (`sweep.LAST_JOBS`) and collected into runs.csv at its end, before
  the tally.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from .. import startup
from ..errors import FatalError, RepcostError, io_error
from ..rundir import append_line, atomic_write_bytes, check_place
from ..sweep import LAST_JOBS
from .collect import report_sweep

OUTCOMES = ".sweep_outcomes"  # <OUTCOMES>.<launch>: start time and job count, then per ended job "ok|failed<TAB>dir<TAB>error"
LAUNCH = "REPCOST_SWEEP_LAUNCH"  # the launch's id (its pid), in the environment its job processes inherit


def _outcomes(sweep_dir: str | Path, launch: str) -> Path:
    return Path(sweep_dir) / (f"{OUTCOMES}.{launch}" if launch else OUTCOMES)


def count_jobs(config: DictConfig) -> int:
    """Jobs of a basic-sweeper multirun: the product of the sweep lists (command line over hydra.sweeper.params)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    lines = {str(k): f"{k}={v}" for k, v in params.items()}
    lines.update({str(o).split("=", 1)[0].lstrip("+~"): str(o) for o in config.hydra.overrides.task})
    sweeps = [o for o in OverridesParser.create().parse_overrides(list(lines.values())) if o.is_sweep_override()]
    return math.prod(max(1, len(list(o.sweep_string_iterator()))) for o in sweeps)


def _fatal(fn, *args) -> Any:
    try:
        return fn(*args)
    except RepcostError as e:
        raise FatalError(str(e)) from None


class GuardsCallback(Callback):
    """Checks the places of runs and sweeps before Hydra creates them; records, collects and tallies a multirun's
    jobs."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        run_dir = _fatal(check_place, config, "hydra.run.dir")
        startup.note_run_dir(run_dir)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.mode == RunMode.MULTIRUN:
            startup.note_run_dir(config.hydra.runtime.output_dir)
            sweep, job = Path(config.hydra.sweep.dir).resolve(), Path(config.hydra.runtime.output_dir).resolve()
            append_line(sweep / LAST_JOBS, str(job.relative_to(sweep)))  # one appended line: safe from parallel jobs

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = _fatal(check_place, config, "hydra.sweep.dir")
        os.environ[LAUNCH] = str(os.getpid())
        try:
            total = count_jobs(config)
        except Exception:  # a sweeper this cannot count (a plugin's): progress without a total
            total = 0
        try:
            sweep.mkdir(parents=True, exist_ok=True)
            _outcomes(sweep, os.environ[LAUNCH]).write_text(f"{time.time()} {total}\n")
        except OSError as e:
            raise FatalError(str(io_error(e.filename or sweep, e))) from None
        atomic_write_bytes(sweep / LAST_JOBS, b"")  # jobs of earlier multiruns stay on disk but are no longer last

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        if config.hydra.mode != RunMode.MULTIRUN or job_return is None:
            return
        value = getattr(job_return, "_return_value", None)  # .return_value re-raises a failed job's exception
        failed = str(getattr(job_return, "status", "")).endswith("FAILED") or (
            isinstance(value, dict) and value.get("status") == "failed")
        error = (value.get("error", "") if isinstance(value, dict) else value) if failed else ""
        outcomes = _outcomes(config.hydra.sweep.dir, os.environ.get(LAUNCH, ""))
        try:  # one appended line: safe from parallel job processes
            append_line(outcomes, f"{'failed' if failed else 'ok'}\t{config.hydra.runtime.output_dir}\t"
                                  f"{' '.join(str(error).split())}")
            lines = outcomes.read_text().splitlines()  # the launch's start time and job count, then one per ended job
            start, total = lines[0].split()
            done, elapsed = len(lines) - 1, time.time() - float(start)
            eta = max(elapsed / done * (int(total) - done), 0.0)
            fmt = lambda t: f"{int(t // 60)}m{int(t % 60):02d}s"  # noqa: E731
            print(f"sweep: {done}/{total} jobs done, {fmt(elapsed)} elapsed, ETA {fmt(eta)}", flush=True)
        except (RepcostError, OSError, ValueError):  # (a file without the launch's first line: no progress to tell)
            pass  # the job's own error line already named its directory

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Collect the sweep, then tally this launch's jobs: any failed, and the command ends with one line and exit
        status 1."""
        report_sweep(Path(config.hydra.sweep.dir))
        own = _outcomes(config.hydra.sweep.dir, os.environ.get(LAUNCH, ""))
        try:  # (and the shared file of job processes that did not inherit the environment, e.g. sbatch --export=NONE)
            lines = [ln for f in {own, _outcomes(config.hydra.sweep.dir, "")} if f.exists()
                     for ln in f.read_text().splitlines()]
            own.unlink(missing_ok=True)
        except OSError:
            return
        ends = [(ln.split("\t") + ["", ""])[:3] for ln in lines if "\t" in ln]
        failed = [(d, error) for kind, d, error in ends if kind == "failed"]
        if failed:
            job, error = failed[0]
            first = f"see {Path(job) / 'error.txt'}" if (Path(job) / "error.txt").is_file() else f"{job}: {error}"
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            raise FatalError(f"{len(failed)} of {len(ends)} jobs failed: {first}{more}; relaunch the same command to "
                             "retry the failed jobs", code=1)
