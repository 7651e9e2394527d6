"""Start-up cost of the command line: `repcost-train --help`, `import repcost`, and a demo run's overhead.

A run's overhead is the process wall time minus the training wall time the run reports
(`summary.json` `wall_time_s`: data, model, training and final analyses), i.e. what every run pays
to start Python, import, compose and validate the config and write its files. Targets on an idle
2-core machine: demo overhead <= 2.5 s, `--help` <= 1.5 s. Each figure is the median of `--rounds`
fresh processes. `--venv` measures another installation (e.g. another checkout's `.venv`).

    python benchmarks/startup.py [--venv .venv] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _timed(cmd: list[str], cwd: str) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def demo_overhead(train: str, cwd: str, k: int) -> tuple[float, float]:
    """(process wall time, training wall time) of one `repcost-train` with defaults in a new run directory."""
    run_dir = Path(cwd) / f"run{k}"
    wall = _timed([train, f"hydra.run.dir={run_dir}", "train.progress=false"], cwd)
    return wall, float(json.loads((run_dir / "summary.json").read_text())["wall_time_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", default=str(Path(sys.executable).parent.parent), help="installation to measure")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    bin_dir = Path(a.venv) / "bin"
    train, python = str(bin_dir / "repcost-train"), str(bin_dir / "python")
    with tempfile.TemporaryDirectory() as cwd:
        helps = [_timed([train, "--help"], cwd) for _ in range(a.rounds)]
        imports = [_timed([python, "-c", "import repcost"], cwd) for _ in range(a.rounds)]
        runs = [demo_overhead(train, cwd, k) for k in range(a.rounds)]
    overhead = statistics.median(w - t for w, t in runs)
    print(f"installation: {a.venv} (median of {a.rounds} processes each)")
    print(f"  repcost-train --help     {statistics.median(helps):6.2f} s   (target <= 1.5 s)")
    print(f"  python -c 'import repcost' {statistics.median(imports):4.2f} s")
    print(f"  demo run: process {statistics.median(w for w, _ in runs):.2f} s, training "
          f"{statistics.median(t for _, t in runs):.2f} s, overhead {overhead:.2f} s   (target <= 2.5 s)")


if __name__ == "__main__":
    main()
