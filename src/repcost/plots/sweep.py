"""Figure builders for any sweep or run: a column of runs.csv against another, and metric curves.

Pure functions of rows and arrays (no file access), so tests and notebooks can call them directly.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


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
    groups: dict[Any, dict[Any, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        xv, yv = r.get(x), r.get(y)
        if xv is None or not _is_number(yv) or not math.isfinite(yv):
            continue
        groups[r.get(hue) if hue else None][xv].append(float(yv))
    out = []
    for h in sorted(groups, key=_sort_key):
        by_x = groups[h]
        xs = sorted(by_x, key=_sort_key)
        vals = [np.asarray(by_x[v]) for v in xs]
        label = f"{hue}={h}" if hue else y
        out.append(Series(label, xs, np.array([v.mean() for v in vals]), np.array([v.min() for v in vals]),
                          np.array([v.max() for v in vals]), np.array([len(v) for v in vals]),
                          [(xv, float(yv)) for xv in xs for yv in by_x[xv]]))
    return out


def sweep_figure(series: Sequence[Series], x: str, y: str, logx: bool = False, logy: bool = False,
                 title: str | None = None):
    """Mean of y against x per hue group, the min–max band over the grouped runs, and every run as a dot."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    numeric = all(_is_number(v) for s in series for v in s.x)
    cats = sorted({v for s in series for v in s.x}, key=_sort_key) if not numeric else []

    def pos(v):
        return v if numeric else cats.index(v)

    for s in series:
        xs = [pos(v) for v in s.x]
        (line,) = ax.plot(xs, s.mean, marker="o", label=s.label)
        if (s.n > 1).any():
            ax.fill_between(xs, s.lo, s.hi, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.scatter([pos(p[0]) for p in s.points], [p[1] for p in s.points], s=8, color=line.get_color(), alpha=0.6)
    if not numeric:
        ax.set_xticks(range(len(cats)), [str(c) for c in cats])
    elif not logx:
        values = sorted({v for s in series for v in s.x})
        if len(values) <= 12 and all(isinstance(v, int) for v in values):  # depths, widths: no 2.5 ticks
            ax.set_xticks(values)
    if logx and numeric:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    n_max = max((int(s.n.max()) for s in series), default=0)
    ax.set_title(title or f"{y} vs {x}: mean, min–max over ≤{n_max} runs per point", fontsize=9)
    if len(series) > 1 or series and series[0].label != y:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def curves_figure(curves: Sequence[tuple[str, np.ndarray, np.ndarray]], x: str, y: str, logx: bool = False,
                  logy: bool = False, title: str | None = None):
    """One line per (label, xs, ys): a logged metric of several runs against the step."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for label, xs, ys in curves:
        ax.plot(xs, ys, label=label, marker="." if len(xs) <= 30 else None)  # a short run's few points stay visible
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or f"{y} during training", fontsize=9)
    if len(curves) > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
