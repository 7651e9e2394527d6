"""Start-up cost of the command line: `repcost-train --help`, `import repcost`, and a demo run's overhead.

A run's overhead is the process wall time minus the training wall time the run reports
(`summary.json` `wall_time_s`: data, model and the training loop), i.e. what every run pays to start
Python, import, compose and validate the config, run the final certificate, write its files, draw
figures/fit.png (matplotlib's import included) and exit. The demo is
`make demo`'s run (`repcost-train train=certified`). Targets on an idle 2-core machine: demo overhead
<= 2.5 s, `--help` <= 1.5 s. Each figure is the median of `--rounds` fresh processes; the load average is
printed at the start and the end.
A shared machine's speed drifts (on the 2-core test machine the same `import torch` took 1.6-3.1 s within an
hour), so the time of `import torch` is printed as a yardstick for comparing figures taken at different times.
On a busy machine wall times stretch; the CPU time (user + system) of the same demo with zero training
steps (everything but the steps) approximates the overhead an idle core would show (an upper bound: it
also counts torch's OpenMP workers spinning). `--venv` measures another installation (e.g. another
checkout's `.venv`).

    python benchmarks/startup.py [--venv .venv] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _timed(cmd: list[str], cwd: str) -> float:
    return _run(cmd, cwd)[0]


# Bytecode as an installation has it: a wheel install compiles it, an editable checkout writes it on first use
# (unless PYTHONDONTWRITEBYTECODE is set, as on some machines; then every process would compile repcost anew).
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(cmd: list[str], cwd: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_ENV)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def demo_overhead(train: str, cwd: str, k: int) -> tuple[float, float]:
    """(process wall time, training wall time) of one `make demo` run in a new run directory."""
    run_dir = Path(cwd) / f"run{k}"
    wall = _timed([train, "train=certified", f"hydra.run.dir={run_dir}", "train.progress=false"], cwd)
    return wall, float(json.loads((run_dir / "summary.json").read_text())["wall_time_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", default=str(Path(sys.executable).parent.parent), help="installation to measure")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    bin_dir = Path(a.venv) / "bin"
    train, python = str(bin_dir / "repcost-train"), str(bin_dir / "python")
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as cwd:
        _run([train, "--help"], cwd)  # bytecode written where it is missing, before anything is timed
        helps = [_timed([train, "--help"], cwd) for _ in range(a.rounds)]
        imports = [_timed([python, "-c", "import repcost"], cwd) for _ in range(a.rounds)]
        torch_imports = [_timed([python, "-c", "import torch"], cwd) for _ in range(a.rounds)]
        runs = [demo_overhead(train, cwd, k) for k in range(a.rounds)]
        zero = [_run([train, f"hydra.run.dir={Path(cwd) / f'zero{k}'}", "train.progress=false",
                      "train.phases.0.steps=0", "train.phases.1.steps=0"], cwd) for k in range(a.rounds)]
        help_cpu = [_run([train, "--help"], cwd)[1] for _ in range(a.rounds)]
    overhead = statistics.median(w - t for w, t in runs)
    print(f"installation: {a.venv} (median of {a.rounds} processes each; load average {load_start:.2f} at the "
          f"start, {os.getloadavg()[0]:.2f} at the end)")
    print(f"  repcost-train --help     {statistics.median(helps):6.2f} s   (target <= 1.5 s; CPU "
          f"{statistics.median(help_cpu):.2f} s)")
    print(f"  python -c 'import repcost' {statistics.median(imports):4.2f} s")
    print(f"  python -c 'import torch'   {statistics.median(torch_imports):4.2f} s   (every run pays it: the yardstick "
          "of this machine's speed at the time)")
    print(f"  demo run: process {statistics.median(w for w, _ in runs):.2f} s, training "
          f"{statistics.median(t for _, t in runs):.2f} s, overhead {overhead:.2f} s   (target <= 2.5 s)")
    print(f"  demo with 0 steps (the overhead alone): wall {statistics.median(w for w, _ in zero):.2f} s, "
          f"CPU {statistics.median(c for _, c in zero):.2f} s (CPU time: what an idle core would take)")


if __name__ == "__main__":
    main()
