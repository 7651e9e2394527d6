"""The Hydra callback that guards and records what Hydra does outside repcost's task function.

* Before Hydra creates a run's or a sweep's directory (`on_run_start`, `on_multirun_start`): the directory is
  checked (`rundir.check_place`): names taken into it are plain names, `hydra.run.dir` is not empty, no run inside a
  sweep root and no sweep inside a run. A refusal is a `FatalError` (Hydra turns a callback's Exception into a
  warning and goes on).
* A multirun's jobs are recorded as they start (`sweep.LAST_JOBS`); each job's outcome is what its own directory
  holds (FINISHED, error.txt), or, for a finished job that a relaunch refuses, a line of `sweep.REFUSED`. As each
  job ends, the launch's progress is printed (`sweep: k/n jobs done, elapsed, ETA`: `on_job_end` runs in the job's
  own process under joblib or submitit, which inherit the launch's start time and job count from its environment). At the multirun's end the sweep is collected into runs.csv, and a failed job
  of it makes `repcost-train -m` exit non-zero with one line.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from .. import startup
from ..errors import FatalError, RepcostError
from ..rundir import ERROR, FINISHED, RunDir, append_line, atomic_write_bytes, check_place
from ..sweep import LAST_JOBS, REFUSED
from .collect import report_sweep

LAUNCH = "REPCOST_SWEEP_LAUNCH"  # "<start time> <job count>" of the launch, in the environment its jobs inherit


def count_jobs(config: DictConfig) -> int:
    """Jobs of a basic-sweeper multirun: the product of the sweep lists (command line over hydra.sweeper.params)."""
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


def _lines(path: Path) -> list[str]:
    """A sweep's list file, one entry per line, in order, once each (none where it cannot be read)."""
    try:
        return [ln for ln in dict.fromkeys(path.read_text().splitlines()) if ln]
    except OSError:
        return []


class GuardsCallback(Callback):
    """Checks the places of runs and sweeps before Hydra creates them; records, collects and tallies a multirun's
    jobs."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        startup.note_run_dir(_fatal(check_place, config, "hydra.run.dir"))

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.mode == RunMode.MULTIRUN:
            startup.note_run_dir(config.hydra.runtime.output_dir)
            sweep, job = Path(config.hydra.sweep.dir).resolve(), Path(config.hydra.runtime.output_dir).resolve()
            append_line(sweep / LAST_JOBS, str(job.relative_to(sweep)))  # one appended line: safe from parallel jobs

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = _fatal(check_place, config, "hydra.sweep.dir")
        try:
            total = count_jobs(config)
        except Exception:  # a sweeper this cannot count (a plugin's): progress without a total
            total = 0
        os.environ[LAUNCH] = f"{time.time()} {total}"
        for name in (LAST_JOBS, REFUSED):  # jobs of earlier multiruns stay on disk but are no longer last
            _fatal(atomic_write_bytes, sweep / name, b"")  # (the first creates the sweep directory)

    def on_job_end(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.mode != RunMode.MULTIRUN or LAUNCH not in os.environ:
            return
        sweep = Path(config.hydra.sweep.dir)
        jobs = _lines(sweep / LAST_JOBS)  # the jobs started so far whose directory says they ended
        done = sum((sweep / j / FINISHED).exists() or (sweep / j / ERROR).exists() for j in jobs)
        start, total = os.environ[LAUNCH].split()
        elapsed = time.time() - float(start)
        eta = max(elapsed / max(done, 1) * (int(total) - done), 0.0)
        fmt = lambda t: f"{int(t // 60)}m{int(t % 60):02d}s"  # noqa: E731
        print(f"sweep: {done}/{total} jobs done, {fmt(elapsed)} elapsed, ETA {fmt(eta)}", flush=True)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Collect the sweep; a job of this multirun that failed (error.txt), was refused (REFUSED) or left nothing in
        its directory ends the command with one line and exit status 1 (a preempted job, or one another launch is running, is no failure:
        a relaunch resumes it)."""
        report_sweep(Path(config.hydra.sweep.dir))
        sweep = Path(config.hydra.sweep.dir).absolute()  # the line names files wherever it is read
        jobs, refused = _lines(sweep / LAST_JOBS), dict(ln.split("\t", 1) for ln in _lines(sweep / REFUSED))
        bad = [j for j in jobs if j in refused or (sweep / j / ERROR).exists() or not RunDir(sweep / j).has_results()]
        if bad:
            failed = [sweep / j / ERROR for j in bad if (sweep / j / ERROR).exists()]
            first = f"see {failed[0]}" if failed else f"{sweep / bad[0]}: {refused.get(bad[0], 'nothing written')}"
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            hint = ("the finished runs are left as they were: correct the command" if all(j in refused for j in bad)
                    else "relaunch the same command to retry the failed jobs")
            raise FatalError(f"{len(bad)} of {len(jobs)} jobs failed: {first}{more}; {hint}", code=1)
