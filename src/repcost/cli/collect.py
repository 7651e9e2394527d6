"""`repcost-collect SWEEP_DIR`: one tidy CSV row per sweep job, and the Hydra callback that runs it."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from ..errors import RepcostError
from .hydra_errors import OneLineParser
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


class CollectCallback(Callback):
    """Writes the sweep's runs.csv (and layers.csv) at the end of every multirun."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        start_last_jobs(Path(config.hydra.sweep.dir))

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.mode == RunMode.MULTIRUN:
            add_last_job(Path(config.hydra.sweep.dir), Path(config.hydra.runtime.output_dir))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        try:
            rows, layers = collect(sweep_dir)
        except RepcostError as e:
            print(f"repcost-collect: {e}", file=sys.stderr)
            return
        print("sweep: " + _report(sweep_dir, rows, layers))
        failed = [r for r in rows if r["status"] == "failed"]
        for r in failed:
            print(f"  failed: {r['job']}: {r['error']}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    """Console entry point for repcost-collect."""
    ap = OneLineParser(prog="repcost-collect",
                                 description="Aggregate a sweep directory into runs.csv and layers.csv.")
    ap.add_argument("sweep_dir", type=Path)
    a = ap.parse_args(argv)
    try:
        rows, layers = collect(a.sweep_dir)
    except RepcostError as e:
        print(f"repcost-collect: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(_report(a.sweep_dir, rows, layers))


if __name__ == "__main__":
    main()
