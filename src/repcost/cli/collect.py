"""`repcost-collect SWEEP_DIR`: one tidy CSV row per sweep job (also written at the end of every multirun)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from ..errors import OneLineParser, RepcostError, report_left_out
from ..config.messages import clean_exit
from ..sweep import LAYERS_CSV, RUNS_CSV, collect


def _report(sweep_dir: Path, rows: list, layers: list) -> str:
    counts = Counter(r["status"] for r in rows)
    text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    out = f"{len(rows)} jobs ({text}) -> {sweep_dir / RUNS_CSV}"
    if stale := sum(1 for r in rows if r.get("last_sweep") is False):
        out = f"{out} ({stale} of them from an earlier multirun: last_sweep=False)"
    if layers:
        out += f" and {sweep_dir / LAYERS_CSV}"
    return out


def report_sweep(sweep_dir: Path) -> None:
    """At the end of a multirun: write the sweep's runs.csv (and layers.csv), say what it holds."""
    try:
        rows, layers, skipped = collect(sweep_dir)
    except RepcostError as e:
        print(f"repcost-collect: {e}", file=sys.stderr)
        return
    for line in skipped:
        print(f"repcost-collect: warning: {line}", file=sys.stderr)
    print("sweep: " + _report(sweep_dir, rows, layers))
    for r in rows:
        if r["status"] == "failed":
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
