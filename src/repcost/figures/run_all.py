"""`make figures`: every figure script in turn, one line each: its verdict, the line behind it, its time.

Each script's full printout goes to <log dir>/<id>.log (figures/quick/ for the quick variants, figures/ with
--full); the exit status is 0 when every script ran, whatever the verdicts, 1 otherwise. Sweeps run with the
`parallel` launcher (one job per core) unless --launcher says otherwise.

    python -m repcost.figures.run_all [--full] [--only ID ...] [--launcher NAME]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from ..paths import REPO_ROOT
from . import FIG_DIR


def summary_line(fig_id: str, output: str, seconds: float, code: int) -> str:
    """`<id>  pass|fail  <time>  <the verdict's last line>` from a figure script's printout."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    at = max((i for i, ln in enumerate(lines) if ln.startswith("verdict: ")), default=None)
    if code != 0 or at is None:
        why = next((ln for ln in reversed(lines) if ln.startswith("error:")), f"exit status {code}")
        return f"{fig_id:20s} error {seconds:6.0f} s  {why}"
    label, behind = lines[at].removeprefix("verdict: "), lines[at - 1] if at > 0 else ""
    return f"{fig_id:20s} {label:5s} {seconds:6.0f} s  {behind}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="paper settings (hours on a CPU; default: the quick variants)")
    ap.add_argument("--only", nargs="+", default=None, metavar="ID", help="these figures only")
    ap.add_argument("--launcher", default="parallel", help="hydra/launcher of every sweep (default: parallel)")
    a = ap.parse_args(argv)
    ids = a.only or sorted(p.stem for p in (REPO_ROOT / "experiments").glob("*.py"))
    log_dir = FIG_DIR if a.full else FIG_DIR / "quick"
    log_dir.mkdir(parents=True, exist_ok=True)
    ok, t_all = True, time.perf_counter()
    for fig_id in ids:
        t0 = time.perf_counter()
        cmd = [sys.executable, str(REPO_ROOT / "experiments" / f"{fig_id}.py"), "--launcher", a.launcher]
        p = subprocess.run(cmd + (["--full"] if a.full else []), capture_output=True, text=True,
                           env={**os.environ, "MPLBACKEND": "Agg"})
        (log_dir / f"{fig_id}.log").write_text(p.stdout + p.stderr)
        print(summary_line(fig_id, p.stdout + p.stderr, time.perf_counter() - t0, p.returncode), flush=True)
        ok &= p.returncode == 0
    print(f"{len(ids)} figures in {(time.perf_counter() - t_all) / 60:.1f} min; logs in {log_dir}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
