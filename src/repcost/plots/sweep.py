"""Figure builders for any sweep or run: a column of runs.csv against another, and metric curves.

Pure functions of rows and arrays (no file access), so tests and notebooks can call them directly.
Axes read in the papers' notation (`label`); lines cycle through markers and line styles so that lines
lying on top of each other stay visible; integer-valued columns (depths, widths, steps) get integer ticks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# readable names of the usual columns (the papers' symbols; docs/ARCHITECTURE.md, Conventions); any other key
# is shown as given
LABELS = {
    "train.lam": "λ", "param_sq_norm": "‖θ‖²", "param_sq_norm_per_depth": "‖θ‖²/L", "cost": "cost C",
    "model.depth": "depth L", "model.width": "width", "seed": "seed", "train_loss": "train loss",
    "test_loss": "test loss", "objective": "objective", "step": "step", "lr": "learning rate",
    "data.n_train": "N (training points)", "wall_time_s": "wall time (s)", "steps": "steps",
}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")


def label(key: str) -> str:
    """The axis/legend name of a column or metric: λ for train.lam, ‖θ‖² for param_sq_norm, …; else the key."""
    return LABELS.get(key, key)


def line_style(i: int) -> dict:
    """Marker and line style of the i-th line: both cycle (8 markers, 4 styles), so no two of the first 8 match."""
    return {"marker": MARKERS[i % len(MARKERS)], "linestyle": LINESTYLES[i % len(LINESTYLES)]}


@dataclass
class Series:
    """One hue group of a sweep plot: per x value the mean, min and max of y and the number of runs."""

    label: str
    x: list
    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    n: np.ndarray
    points: list[tuple[Any, float]]  # every run's (x, y), drawn as dots so single runs stay visible


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _sort_key(v: Any):
    # numbers before strings, each in their natural order (x may be a group choice like train=adam)
    return (0, v, "") if _is_number(v) else (1, 0, str(v))


def aggregate(rows: Sequence[dict], x: str, y: str, hue: str | None = None) -> list[Series]:
    """Group rows by `hue`, then by `x`; mean and min–max of numeric, finite `y` over the rest (seeds, …)."""
    groups: dict[Any, dict[Any, list]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        xv, yv = r.get(x), r.get(y)
        if xv is None or not _is_number(yv) or not math.isfinite(yv):
            continue
        groups[r.get(hue) if hue else None][xv].append(yv)
    out = []
    for h in sorted(groups, key=_sort_key):
        by_x = groups[h]
        xs = sorted(by_x, key=_sort_key)
        vals = [np.asarray(by_x[v], dtype=float) for v in xs]
        out.append(Series(f"{label(hue)}={h}" if hue else label(y), xs, np.array([v.mean() for v in vals]),
                          np.array([v.min() for v in vals]), np.array([v.max() for v in vals]),
                          np.array([len(v) for v in vals]), [(xv, float(yv)) for xv in xs for yv in by_x[xv]]))
    return out


def sweep_figure(series: Sequence[Series], x: str, y: str, logx: bool = False, logy: bool = False,
                 title: str | None = None, xlabel: str | None = None, ylabel: str | None = None):
    """Mean of y against x per hue group, the min–max band over the grouped runs, and every run as a dot;
    the legend gives each line's runs per point (n)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    numeric = all(_is_number(v) for s in series for v in s.x)
    cats = sorted({v for s in series for v in s.x}, key=_sort_key) if not numeric else []

    def pos(v):
        return v if numeric else cats.index(v)

    for i, s in enumerate(series):
        xs = [pos(v) for v in s.x]
        lo, hi = int(s.n.min()), int(s.n.max())  # runs per point, e.g. n=3 or, where points differ, n=1–3
        (line,) = ax.plot(xs, s.mean, label=f"{s.label} (n={lo}{f'–{hi}' if hi > lo else ''})", markersize=6,
                          fillstyle="none", **line_style(i))
        if (s.n > 1).any():
            ax.fill_between(xs, s.lo, s.hi, color=line.get_color(), alpha=0.15, linewidth=0)
        ax.scatter([pos(p[0]) for p in s.points], [p[1] for p in s.points], s=8, color=line.get_color(), alpha=0.6)
    if not numeric:
        ax.set_xticks(range(len(cats)), [str(c) for c in cats])
    return _finish(fig, ax, logx and numeric, logy, [p[0] for s in series for p in s.points] if numeric else [],
                   [p[1] for s in series for p in s.points], xlabel or label(x), ylabel or label(y),
                   title or f"{label(y)} vs {label(x)}: mean, min–max band, each run a dot", 8 if series else None)


def curves_figure(curves: Sequence[tuple[str, np.ndarray, np.ndarray]], x: str, y: str, logx: bool = False,
                  logy: bool = False, title: str | None = None, xlabel: str | None = None, ylabel: str | None = None):
    """One line per (label, xs, ys): a logged metric of several runs against the step."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for i, (name, xs, ys) in enumerate(curves):
        every = max(1, len(xs) // 12)  # a dozen markers per line: enough to tell lines apart, few enough to read
        ax.plot(xs, ys, label=name, markevery=every, markersize=5, fillstyle="none", **line_style(i))
    return _finish(fig, ax, logx, logy, np.concatenate([c[1] for c in curves]), np.concatenate([c[2] for c in curves]),
                   xlabel or label(x), ylabel or label(y), title or f"{label(y)} during training",
                   7 if len(curves) > 1 else None)


def _finish(fig, ax, logx: bool, logy: bool, xs, ys, xlabel: str, ylabel: str, title: str, legend_size: int | None):
    """Log scales, integer ticks on a linear axis whose values (`xs`, `ys`: every value drawn) are all whole numbers
    (depths, steps, ranks: MaxNLocator, or the value itself where there is one), the labels and the legend (None:
    none); laid out."""
    from matplotlib.ticker import FixedLocator, MaxNLocator

    if logx:
        ax.set_xscale("log")  # only then: setting a scale resets the tick locators a categorical axis was given
    if logy:
        ax.set_yscale("log")
    for log, axis, values in ((logx, ax.xaxis, xs), (logy, ax.yaxis, ys)):
        values = np.asarray(values, dtype=float)
        values = np.unique(values[np.isfinite(values)])  # what is drawn: matplotlib leaves out ±inf and NaN
        if not log and values.size and np.all(values == np.round(values)):
            axis.set_major_locator(FixedLocator(values) if values.size == 1 else MaxNLocator(integer=True))
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.set_title(title, fontsize=9)
    if legend_size:
        ax.legend(fontsize=legend_size)
    fig.tight_layout()
    return fig
