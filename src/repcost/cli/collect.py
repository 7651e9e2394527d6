"""`repcost-collect SWEEP_DIR`: one tidy CSV row per sweep job, and the Hydra callback that runs it."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from ..errors import RepcostError
from ..sweep import LAYERS_CSV, RUNS_CSV, collect


def _report(sweep_dir: Path, rows: list, layers: list) -> str:
    counts = Counter(r["status"] for r in rows)
    text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    out = f"{len(rows)} jobs ({text}) -> {sweep_dir / RUNS_CSV}"
    if layers:
        out += f" and {sweep_dir / LAYERS_CSV}"
    return out


class CollectCallback(Callback):
    """Writes the sweep's runs.csv (and layers.csv) at the end of every multirun."""

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
    ap = argparse.ArgumentParser(prog="repcost-collect",
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
