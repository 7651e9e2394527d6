"""Figure builders for Jacot, Golikov, Hongler, Gabriel 2022 (arrays in, matplotlib Figure out)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter


def _arrow_scale(points: np.ndarray, *forces: np.ndarray, frac: float = 0.15) -> float:
    """A common factor making the longest force arrow `frac` of the point cloud's extent."""
    extent = float(np.ptp(points, axis=0).max()) or 1.0
    longest = max(float(np.linalg.norm(f, axis=1).max()) for f in forces) or 1.0
    return frac * extent / longest


def forces_panel(ax, points: np.ndarray, attraction: np.ndarray, repulsion: np.ndarray, title: str = "",
                 labels: Optional[np.ndarray] = None, rays: Optional[Sequence[np.ndarray]] = None,
                 label_names: Optional[Sequence[str]] = None):
    """One Fig 1 panel: 2-D projected points, attraction (green) and repulsion (red) arrows, rays (grey dashed)."""
    k = _arrow_scale(points, attraction, repulsion)
    if labels is None:
        ax.scatter(points[:, 0], points[:, 1], s=14, c="k", zorder=3)
    else:
        for j, lab in enumerate(np.unique(labels)):
            sel = labels == lab
            name = label_names[j] if label_names is not None else str(lab)
            ax.scatter(points[sel, 0], points[sel, 1], s=14, zorder=3, label=name)
        ax.legend(fontsize=7, loc="best")
    for f, col in ((attraction, "tab:green"), (repulsion, "tab:red")):
        ax.quiver(points[:, 0], points[:, 1], k * f[:, 0], k * f[:, 1], color=col, angles="xy",
                  scale_units="xy", scale=1.0, width=0.004, alpha=0.8)
    if rays:
        r = float(np.abs(points).max()) * 1.1
        for d in rays:
            d = np.asarray(d, dtype=float)
            n = np.linalg.norm(d)
            if n > 0:
                ax.plot([0, r * d[0] / n], [0, r * d[1] / n], ls="--", c="grey", lw=0.8, zorder=1)
    ax.scatter([0], [0], marker="+", c="grey", s=30)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    return ax


def _row_figure(draw, panels: Sequence[dict], panel_width: float) -> Figure:
    """One row of axes, `draw(ax, **panel)` on each."""
    fig = Figure(figsize=(panel_width * len(panels), 4))
    for ax, p in zip(np.atleast_1d(fig.subplots(1, len(panels))), panels):
        draw(ax, **p)
    fig.tight_layout()
    return fig


def forces_figure(panels: Sequence[dict]) -> Figure:
    """Fig 1: one `forces_panel` per dict (keys: points, attraction, repulsion, title, labels, rays, label_names)."""
    return _row_figure(forces_panel, panels, 4.2)


def plateau_panel(ax, series: Sequence[dict], title: str = "", ylabel: str = "loss", marks: Sequence[float] = (),
                  yscale: str = "log"):
    """Loss against width (log x). Each series: widths, values, label, style ('-' train, '--' test),
    optional trials=(widths, values) drawn as small dots. `marks`: vertical dotted lines (e.g. N²/4).
    yscale: log, or symlog (linear below 1, log above: for relative excesses in % that reach 0)."""
    for s in series:
        line, = ax.plot(s["widths"], s["values"], s.get("style", "-"), marker="o", ms=3, label=s["label"],
                        color=s.get("color"))
        if s.get("trials") is not None:
            tw, tv = s["trials"]
            ax.plot(tw, tv, ".", ms=3, color=line.get_color(), alpha=0.5)
    for m in marks:
        ax.axvline(m, ls=":", c="grey")
    ax.set_xscale("log")
    if yscale == "symlog":
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_ylim(bottom=-0.1)  # the quantities are ≥ 0 up to rounding
    else:
        ax.set_yscale(yscale)
    ticks = sorted({float(w) for s in series for w in s["widths"]} | {float(m) for m in marks})
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xlabel("width")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return ax


def plateau_figure(panels: Sequence[dict]) -> Figure:
    """Fig 2 / Prop 14–15: one `plateau_panel` per dict (keys: series, title, ylabel, marks, yscale)."""
    return _row_figure(plateau_panel, panels, 5.0)
