"""`repcost-collect SWEEP_DIR`: one tidy CSV row per sweep job, and the Hydra callback that runs it."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from ..errors import RepcostError, report_left_out
from .hydra_errors import OneLineParser, clean_exit
from ..runio import atomic_write_bytes
from ..sweep import LAYERS_CSV, RUNS_CSV, add_last_job, collect, start_last_jobs


def _report(sweep_dir: Path, rows: list, layers: list) -> str:
    counts = Counter(r["status"] for r in rows)
    text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    out = f"{len(rows)} jobs ({text}) -> {sweep_dir / RUNS_CSV}"
    stale = sum(1 for r in rows if r.get("last_sweep") is False)
    if stale:
        out = f"{out} ({stale} of them from an earlier multirun: last_sweep=False)"
    if layers:
        out += f" and {sweep_dir / LAYERS_CSV}"
    return out


PROGRESS = ".sweep_progress"  # first line: start time and job count; then one line per finished job


def count_jobs(config: DictConfig) -> int:
    """Jobs of a basic-sweeper multirun: the product of the sweep lists (command line over hydra.sweeper.params)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    lines = {}
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    for k, v in params.items():
        lines[str(k)] = f"{k}={v}"
    for o in config.hydra.overrides.task:
        lines[str(o).split("=", 1)[0].lstrip("+~")] = str(o)
    total = 1
    for o in OverridesParser.create().parse_overrides(list(lines.values())):
        if o.is_sweep_override():
            total *= max(1, len(list(o.sweep_string_iterator())))
    return total


def _progress_line(sweep_dir: Path) -> str:
    """'k/n jobs done, elapsed, ETA' from the progress file (shared by parallel job processes)."""
    import time

    lines = (sweep_dir / PROGRESS).read_text().splitlines()
    start, total = lines[0].split()
    done, elapsed = len(lines) - 1, time.time() - float(start)
    eta = elapsed / done * (int(total) - done) if done else float("nan")
    fmt = lambda t: f"{int(t // 60)}m{int(t % 60):02d}s" if t == t else "?"  # noqa: E731
    return f"sweep: {done}/{total} jobs done, {fmt(elapsed)} elapsed, ETA {fmt(max(eta, 0.0))}"


class CollectCallback(Callback):
    """Reports progress (jobs done / total, ETA) as jobs end; writes runs.csv (and layers.csv) at the end."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        import time

        sweep_dir = Path(config.hydra.sweep.dir)
        start_last_jobs(sweep_dir)
        try:
            total = count_jobs(config)
        except Exception:  # a sweeper this cannot count (a plugin's): progress without a total
            total = 0
        atomic_write_bytes(sweep_dir / PROGRESS, f"{time.time()} {total}\n".encode())

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        if config.hydra.mode != RunMode.MULTIRUN:
            return
        sweep_dir = Path(config.hydra.sweep.dir)
        f = sweep_dir / PROGRESS
        if not f.exists():
            return
        fd = os.open(f, os.O_WRONLY | os.O_APPEND)  # one appended line: safe from parallel job processes
        try:
            os.write(fd, b"done\n")
        finally:
            os.close(fd)
        print(_progress_line(sweep_dir), flush=True)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.mode == RunMode.MULTIRUN:
            add_last_job(Path(config.hydra.sweep.dir), Path(config.hydra.runtime.output_dir))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        try:
            rows, layers, skipped = collect(sweep_dir)
        except RepcostError as e:
            print(f"repcost-collect: {e}", file=sys.stderr)
            return
        for line in skipped:
            print(f"repcost-collect: warning: {line}", file=sys.stderr)
        print("sweep: " + _report(sweep_dir, rows, layers))
        failed = [r for r in rows if r["status"] == "failed"]
        for r in failed:
            print(f"  failed: {r['job']}: {r['error']}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    """Console entry point for repcost-collect."""
    ap = OneLineParser(prog="repcost-collect", description="Aggregate a sweep directory into runs.csv and layers.csv.")
    ap.add_argument("sweep_dir", type=Path)
    ap.add_argument("--allow-missing", action="store_true",
                    help="exit 0 when a job that cannot be read is left out (default: exit 1, the rest still written)")
    a = ap.parse_args(argv)
    with clean_exit("repcost-collect"):
        rows, layers, skipped = collect(a.sweep_dir)
    print(_report(a.sweep_dir, rows, layers))
    total = len(rows) + sum(s.endswith(f"job left out of {RUNS_CSV}") for s in skipped)
    report_left_out("repcost-collect", skipped, total, "jobs", a.allow_missing)


if __name__ == "__main__":
    main()
