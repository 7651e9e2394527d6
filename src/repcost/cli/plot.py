"""`repcost-plot`: a sweep's column against another, or runs' metric curves, to a PNG or PDF.

    repcost-plot SWEEP_DIR --x model.depth --y test_loss --hue train.lam [--logx --logy] --out fig.png
    repcost-plot RUN_DIR [RUN_DIR ...] --y objective [--logy] --out curves.pdf

A sweep directory is one with runs.csv (written at the end of every multirun, or by repcost-collect);
its plot shows, per x (and hue), the mean over the other columns (seeds, …) with the min–max band and
the number of runs per point (n) in the legend. Axes read λ, ‖θ‖², depth L, … (--xlabel/--ylabel/--title
override them); the line printed names the file written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..api import load_run, load_sweep
from ..errors import OneLineParser, RepcostError, did_you_mean, report_left_out
from ..config.messages import clean_exit
from ..rundir import writing

FORMATS = (".png", ".pdf", ".svg")


def _check_column(name: str, flag: str, available: list[str]) -> None:
    if name not in available:
        hint = did_you_mean(name, available) or f"; available: {', '.join(available)}"
        raise RepcostError(f"unknown column {name!r} for {flag}{hint}")


def plot_sweep(sweep_dir: Path, x: str, y: str, hue: str | None, logx: bool, logy: bool, **labels):
    """The figure of `y` against `x` (per `hue`) over a sweep's finished jobs; (figure, number of runs, the jobs
    left out: one line each). `labels`: xlabel, ylabel, title (None: the readable defaults of repcost.plots.sweep.label)."""
    from ..plots.sweep import aggregate, label, sweep_figure

    every = load_sweep(sweep_dir)
    rows = [r for r in every if r.get("status") == "finished"]
    skipped = [f"{r['path']}: {r.get('status')} {r.get('error') or ''}".strip() for r in every
               if r.get("status") != "finished"]
    if not rows:
        raise RepcostError(f"{sweep_dir}: no finished jobs in runs.csv")
    available = sorted({k for r in rows for k in r} - {"path"})
    for name, flag in ((x, "--x"), (y, "--y"), (hue, "--hue")):
        if name is not None:
            _check_column(name, flag, available)
    series = aggregate(rows, x, y, hue)
    if not series:
        raise RepcostError(f"column {y!r} has no finite numbers in {sweep_dir / 'runs.csv'}")
    title = labels.pop("title", None) or (f"{sweep_dir.resolve().name}: {label(y)} vs {label(x)} "
                                          "(mean, min–max band, each run a dot)")
    return sweep_figure(series, x, y, logx=logx, logy=logy, title=title, **labels), len(rows), skipped


def curve_labels(run_dirs: list[Path]) -> list[str]:
    """Short legend labels: the parts of the directory names (sweep jobs: their overrides) not shared by all."""
    names = [d.resolve().name for d in run_dirs]
    if len(set(names)) < len(names):
        return [str(d) for d in run_dirs]
    parts = [n.split(",") for n in names]
    common = set.intersection(*map(set, parts)) if len(parts) > 1 else set()
    return [",".join(x for x in ps if x not in common) or n for ps, n in zip(parts, names)]


def plot_curves(run_dirs: list[Path], x: str, y: str, logx: bool, logy: bool, **labels):
    """The figure of metric `y` against `x` (default: step) of each run (each member of an ensemble run);
    (figure, number of curves, the runs left out, whose metrics.jsonl cannot be read: one line each)."""
    import numpy as np

    from ..plots.sweep import curves_figure

    curves, skipped = [], []
    for d, name in zip(run_dirs, curve_labels(run_dirs)):
        try:
            recs = load_run(d).metrics
        except RepcostError as e:
            skipped.append(str(e))
            continue
        available = sorted({k for r in recs for k in r})
        _check_column(x, "--x", available)
        _check_column(y, "--y", available)
        members = sorted({r.get("member") for r in recs}, key=lambda m: -1 if m is None else m)
        for m in members:
            sel = [r for r in recs if r.get("member") == m and x in r and y in r]
            label = name if m is None else f"{name} member {m}"
            curves.append((label, np.array([r[x] for r in sel], dtype=float), np.array([r[y] for r in sel], dtype=float)))
    if not curves:
        raise RepcostError(f"no run could be read ({skipped[0]})" if skipped else "no runs to plot")
    return curves_figure(curves, x, y, logx=logx, logy=logy, **labels), len(curves), skipped


def check_out(out: Path) -> None:
    """A RepcostError unless `out` is a file name repcost-plot can write: a known format, not a directory,
    not below a file."""
    if out.is_dir():
        raise RepcostError(f"--out {out} is a directory; give a file name, e.g. {out / 'plot.png'}")
    if out.suffix.lower() not in FORMATS:
        raise RepcostError(f"--out {out}: unknown format {out.suffix or '(none)'}; use one of {', '.join(FORMATS)}")
    above = next((p for p in out.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise RepcostError(f"--out {out}: {above} is a file, not a directory")


def main(argv: list[str] | None = None) -> None:
    """Console entry point for repcost-plot."""
    ap = OneLineParser(prog="repcost-plot", description=__doc__.splitlines()[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("paths", nargs="+", type=Path, metavar="DIR", help="a sweep directory, or run directories")
    ap.add_argument("--x", default=None, help="x column (sweep) or metric (curves; default: step)")
    ap.add_argument("--y", default=None, help="y column (sweep) or metric (curves; default: objective)")
    ap.add_argument("--hue", default=None, help="sweep only: one line per value of this column")
    ap.add_argument("--logx", action="store_true", help="log-scale x axis")
    ap.add_argument("--logy", action="store_true", help="log-scale y axis")
    ap.add_argument("--xlabel", default=None, help="x axis label (default: a readable name, e.g. λ for train.lam)")
    ap.add_argument("--ylabel", default=None, help="y axis label (default: a readable name, e.g. ‖θ‖² for param_sq_norm)")
    ap.add_argument("--title", default=None, help="figure title")
    ap.add_argument("--out", type=Path, default="plot.png", help="output file, .png, .pdf or .svg (default: plot.png)")
    ap.add_argument("--allow-missing", action="store_true",
                    help="exit 0 when a run or job is left out (unreadable, failed, unfinished); default: exit 1")
    a = ap.parse_args(argv)
    with clean_exit("repcost-plot"):
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed (and none on a cluster node)
        check_out(a.out)
        if missing := [p for p in a.paths if not p.is_dir()]:
            raise RepcostError(f"{missing[0]}: no such directory")
        labels = {"xlabel": a.xlabel, "ylabel": a.ylabel, "title": a.title}
        if len(a.paths) == 1 and (a.paths[0] / "runs.csv").exists():
            if a.x is None or a.y is None:
                raise RepcostError("a sweep plot needs --x COLUMN and --y COLUMN (and optionally --hue COLUMN)")
            fig, n, skipped = plot_sweep(a.paths[0], a.x, a.y, a.hue, a.logx, a.logy, **labels)
            what, total = f"{n} runs", n + len(skipped)
        else:
            if a.hue is not None:
                raise RepcostError("--hue is for a sweep directory (one with runs.csv); curves are one line per run")
            if sweeps := [p for p in a.paths if (p / "runs.csv").exists()]:
                raise RepcostError(f"{sweeps[0]} is a sweep directory: give it alone (with --x/--y) or give run "
                                   "directories")
            fig, n, skipped = plot_curves(a.paths, a.x or "step", a.y or "objective", a.logx, a.logy, **labels)
            what, total = f"{n} curves", len(a.paths)
        with writing(a.out):
            a.out.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(a.out, dpi=120, bbox_inches="tight")
    print(f"wrote {a.out} ({what})")
    report_left_out("repcost-plot", skipped, total, "runs", a.allow_missing)


if __name__ == "__main__":
    main()
