"""Figure machinery for experiments/<id>.py: run a preset's sweep (reusing finished jobs), load runs, save.

A figure module (`repcost.figures.<id with underscores>`) is three pure steps that tests call on
tiny synthetic runs: `compute(runs) -> rows`, `plot(rows) -> Figure`, `verdict(rows, full) ->
Verdict`; `figure_main(module)` runs them from the command line (experiments/<id>.py) and writes
the verdict into the CSV. Row keys starting with "_" (arrays for the plot) stay out of the CSV.

A figure is a Hydra multirun of the preset `experiment=<id>` (or `<id>-quick`) under
outputs/sweeps/<id>[-quick]/: job directories are derived from the overrides, so a relaunch
skips the finished jobs and a figure script can be rerun cheaply to redraw.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..api import Run, load_run, load_sweep
from ..errors import RepcostError
from ..paths import REPO_ROOT
from ..rundir import atomic_write_bytes, csv_bytes

FIG_DIR = REPO_ROOT / "figures"


def preset_name(fig_id: str, full: bool) -> str:
    """The experiment preset for a figure: `<id>` (paper settings) or `<id>-quick`."""
    return fig_id if full else f"{fig_id}-quick"


def is_full(args, fig_id: str) -> bool:
    """Whether a figure script's `figure_args` ask for the paper-size preset of `fig_id` (--full, or --full-only naming it)."""
    return bool(args.full) or fig_id in (getattr(args, "full_only", None) or ())


def sweep_for(fig_id: str, args) -> list[dict]:
    """Run `repcost-train -m experiment=<preset> name=<sweep> SET` (finished jobs are skipped) as a figure script's
    parsed `figure_args` say (--full, --set, --workdir, --launcher); the rows of its runs.csv.

    The sweep directory outputs/sweeps/<name> is the preset's name, plus a hash of the --set overrides when there
    are any, so that it holds exactly the jobs of this kind of invocation.
    """
    preset = preset_name(fig_id, is_full(args, fig_id))
    name = f"{preset}--{hashlib.sha256(' '.join(sorted(args.set)).encode()).hexdigest()[:8]}" if args.set else preset
    cmd = [sys.executable, "-m", "repcost.cli.train", "-m", f"experiment={preset}", f"name={name}",
           "train.progress=false", *args.set]
    if args.launcher:
        cmd.append(f"hydra/launcher={args.launcher}")
    print("$ " + " ".join(cmd[2:]), flush=True)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    p = subprocess.run(cmd, cwd=args.workdir)
    if p.returncode not in (0, 1):  # 1: some jobs failed, which finished_rows names with their errors
        raise RepcostError(f"sweep for {fig_id} failed (exit {p.returncode})")
    return finished_rows(Path(args.workdir) / "outputs" / "sweeps" / name)


def finished_rows(sweep_dir: Path) -> list[dict]:
    """The sweep's rows (api.load_sweep: the last multirun's jobs, each with `path`); a job that did not finish
    is a RepcostError, since a figure drawn from part of its sweep would mislead."""
    rows = load_sweep(sweep_dir)
    bad = [r for r in rows if r.get("status") != "finished"]
    if bad:
        raise RepcostError(f"{len(bad)} job(s) of {sweep_dir} did not finish, e.g. {bad[0]['job']}: "
                           f"{bad[0].get('error') or bad[0].get('status')}")
    return rows


class LoadedRun(Run):
    """One finished run of a figure's sweep, as compute() receives it: an api.Run whose `data` and `model` (float64,
    through the one checkpoint loader) are loaded once, as attributes."""

    def __init__(self, path):
        super().__init__(load_run(path).path)  # load_run: one line naming a directory that holds no run
        self.data = Run.data(self)
        self.model = Run.model(self, "float64", data=self.data)

    def columns(self, *keys: str) -> dict:
        """The summary's `keys`, then what every figure row reports of its run: train loss, steps, wall time and
        whether it ended at a critical point (None where the summary has no such key)."""
        return {k: self.summary.get(k) for k in (*keys, "train_loss", "steps", "wall_time_s", "critical_point")}


def load_runs(fig_id: str, args) -> list[LoadedRun]:
    """The finished runs of a figure's sweep (`sweep_for`), loaded; a sweep without any is a RepcostError."""
    runs = [LoadedRun(r["path"]) for r in sweep_for(fig_id, args)]
    if not runs:
        raise RepcostError(f"{fig_id}: no finished runs in its sweep")
    return runs


@dataclass
class Verdict:
    """A figure's claim checked on its rows: passed (None where the quick size cannot decide) and the text."""

    passed: Optional[bool]
    text: str


def most_seeds(rows: list[dict], judge: Callable[[list[dict]], tuple[bool, list[str]]], claim: str,
               common: Sequence[dict] = ()) -> Verdict:
    """A verdict over seeds: `judge(rows)` gives (reproduced, lines) for `common` plus one seed's rows (a row
    without a seed is seed 0); reproduced when most seeds are (one seed: its own verdict)."""
    seeds = sorted({r.get("seed", 0) for r in rows})
    lines, passed = [], 0
    for seed in seeds:
        ok, seed_lines = judge([*common, *(r for r in rows if r.get("seed", 0) == seed)])
        passed += ok
        lines += ([f"  seed {seed}: {'reproduced' if ok else 'NOT reproduced'}"] if len(seeds) > 1 else []) + seed_lines
    if len(seeds) > 1:
        lines.append(f"  {claim} in {passed}/{len(seeds)} seeds (reproduced when most are)")
    return Verdict(2 * passed > len(seeds), "\n".join(lines))


def per_seed(claim: str | Callable[[list[dict]], str]) -> Callable:
    """Decorator: a figure's `verdict(rows, full)` from its judge of one seed's rows, `(rows) -> (reproduced, lines)`;
    over several seeds `most_seeds` (the quick size decides by the same rule). `claim` may be read from the rows."""
    def decorate(judge: Callable[[list[dict]], tuple[bool, list[str]]]) -> Callable[..., Verdict]:
        return wraps(judge)(lambda rows, full: most_seeds(rows, judge, claim(rows) if callable(claim) else claim))
    return decorate


def quick_verdict(ok: bool, lines: list[str], full: bool, fig_id: str) -> Verdict:
    """`ok` with `lines`, except that a failure at the quick size decides nothing (only the paper's size can
    refute the paper)."""
    if not ok and not full:
        return Verdict(None, "\n".join(lines + [f"  (quick size; make fig-{fig_id} FULL=1 for the paper's)"]))
    return Verdict(bool(ok), "\n".join(lines))


def preset_data(fig_id: str, full: bool):
    """The data config of a figure's preset (`<id>` or `<id>-quick`), for figures that build their own inputs."""
    from ..config import compose_config, validate

    return validate(compose_config([f"experiment={preset_name(fig_id, full)}"])).data


def figure_main(module, description: str) -> None:
    """experiments/<id>.py: sweep (finished jobs reused) or the module's own `inputs(args)`, compute, plot, verdict;
    PNG and CSV (with a verdict column). A RepcostError (bad input, unfinished sweep) ends with one line and exit 2.

    Paper-settings figures go to figures/, quick ones to figures/quick/ (never over the committed paper figures),
    and the figure says at its foot which variant it is and with what extra overrides."""
    fig_id = module.FIG_ID
    try:
        args = figure_args(description).parse_args()
        full = is_full(args, fig_id)
        # a figure of several sweeps, or of none (analysis only), builds its own inputs
        rows = module.compute(module.inputs(args) if hasattr(module, "inputs") else load_runs(fig_id, args))
        v = module.verdict(rows, full=full)
        label = {True: "pass", False: "fail", None: "n/a at this size"}[v.passed]
        for r in rows:
            r["verdict"] = label
        variant = "paper settings" if full else "quick variant (smaller; make fig-<id> FULL=1 for the paper's)"
        extra = (args.full_only and f" (full: {', '.join(args.full_only)})") or ""
        note = f"{fig_id}: {variant}{extra}" + (f"; overrides {' '.join(args.set)}" if args.set else "")
        out_dir = args.out if args.out is not None else (FIG_DIR if full else FIG_DIR / "quick")
        save_figure(module.plot(rows), fig_id, rows, out_dir, note)
    except RepcostError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2)
    print(f"\n{module.CLAIM}\n{v.text}\nverdict: {label}")


def _relative(value):
    """A path in the repo, in a table cell, relative to the repo (committed CSVs must not hold one machine's
    paths); paths elsewhere (a --workdir outside the repo) stay as they are."""
    if isinstance(value, (str, Path)) and os.path.isabs(value) and Path(value).is_relative_to(REPO_ROOT):
        return str(Path(value).relative_to(REPO_ROOT))
    return value


def save_figure(fig, fig_id: str, rows: list[dict], out_dir: Path, note: str = "") -> tuple[Path, Path]:
    """Write <out_dir>/<id>.png, `note` at its foot, and the plotted data <out_dir>/<id>.csv (row keys starting with
    "_" left out); returns both paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if note:
        fig.text(0.5, -0.01, note, ha="center", va="top", fontsize=8, color="0.35")
    png, csv_path = out_dir / f"{fig_id}.png", out_dir / f"{fig_id}.csv"
    fig.savefig(png, dpi=120, bbox_inches="tight")
    atomic_write_bytes(csv_path, csv_bytes([{k: _relative(v) for k, v in r.items() if not k.startswith("_")}
                                            for r in rows]))
    print(f"wrote {png} and {csv_path}")
    return png, csv_path


def width_curve(rows: list[dict]):
    """(rows sorted by model.width, widths, objectives, trial widths, trial objectives) of a width sweep.

    Trials are the members (members/<i>/) of `train.ensemble_size` runs (the min-over-trials protocol
    of Jacot et al. 2022 Fig 2); a single run has none.
    """
    rows = sorted(rows, key=lambda r: int(r["model.width"]))
    widths = [int(r["model.width"]) for r in rows]
    trials = [(w, float(m.summary["objective"])) for w, r in zip(widths, rows) for m in Run(r["path"]).members()]
    return rows, widths, [float(r["objective"]) for r in rows], [w for w, _ in trials], [v for _, v in trials]


def figure_args(description: str):
    """The common argparse parser of figure scripts: --full, --full-only, --launcher, --out, --workdir, --set."""
    from ..errors import OneLineParser

    ap = OneLineParser(description=description)
    ap.add_argument("--full", action="store_true", help="paper settings (default: the quick variant)")
    ap.add_argument("--full-only", nargs="+", default=[], metavar="PRESET",
                    help="paper settings for these presets only (e.g. one panel of a multi-sweep figure)")
    ap.add_argument("--launcher", default=None, help="hydra/launcher option for the sweep, e.g. parallel, stacked, slurm")
    ap.add_argument("--out", type=Path, default=None,
                    help="where the PNG and CSV go (default: figures/ with --full, else figures/quick/)")
    ap.add_argument("--workdir", type=Path, default=REPO_ROOT, help="where outputs/sweeps/ goes (default: the repo)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="extra overrides for every job")
    return ap

