"""Jacot, Golikov, Hongler, Gabriel 2022, Fig 2: the loss plateau against width (L = 3).

Left: MNIST (N = 1000 in the paper), cross-entropy, two values of λ. Right: teacher data
(N = 1000 Gaussian inputs, teacher depth 3 width 10), MSE with λ = 1e-6, best of 3 trials per width
(train.ensemble_size = 3; every trial is drawn as a dot). Full lines: train objective (data loss +
λ‖θ‖²); dashed: test loss (no regulariser). The start of the plateau is the smallest width from
which every wider net's train objective is within REL_TOL of the best over all widths (and, second rule,
within LOG_FRAC of the curve's log-scale range of the best). Widths whose objective is above a narrower
width's by more than FAIL_TOL are reported as not at their minimum (a zero-padded narrower net matches
it), with the plateau start recomputed without them. jacot22_bipartite draws its loss-against-width panels
with this module's `plot`.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from ..analysis.alignment import optimisation_failures, plateau_start
from ..api import Run
from . import Verdict, sweep_for, width_curve

FIG_ID = "jacot22-fig2"
REL_TOLS = (0.05, 0.01)
FAIL_TOL = 0.05  # a width whose objective is 5 % above a narrower width's has not reached its minimum
LOG_FRAC = 0.05  # log-scale rule: within 5 % of the curve's log range of the best (how the paper's log plot reads)
PLATEAU_BY = 20  # the paper's reading: the plateau starts around width 10, far below N² (we accept ≤ 20)
CLAIM = "Paper (Fig 2): in both settings the plateau starts around width 10, far below N² = 10⁶."


def inputs(args) -> tuple[list[dict], list[dict]]:
    """The MNIST and teacher sweeps' rows."""
    return sweep_for(FIG_ID, args), sweep_for(f"{FIG_ID}-teacher", args)


def compute(inp) -> list[dict]:
    """A row per (panel, λ, width): objective, losses, plateau starts; the first row carries the plot (`_panels`)."""
    mnist, teacher = inp
    cfg_m, cfg_t = [Run(rows[0]["path"]).config for rows in (mnist, teacher)]  # as the runs trained
    lam_t = cfg_t["train"]["lam"]
    curves = [("mnist", lam, [r for r in mnist if float(r["train.lam"]) == lam], f", λ={lam:g}", f", λ={lam:g}")
              for lam in sorted({float(r["train.lam"]) for r in mnist}, reverse=True)]
    out, series = [], {"mnist": [], "teacher": []}
    for panel, lam, rows, tag, test_tag in curves + [("teacher", lam_t, teacher, " (best of trials)", " (best trial)")]:
        rs, w, obj, tw, tv = width_curve(rows)
        series[panel] += [dict(widths=w, values=obj, label=f"train objective{tag}", trials=(tw, tv)),
                          dict(widths=w, values=[float(r["test_loss"]) for r in rs], style="--", label=f"test loss{test_tag}")]
        starts = {**{f"{t:g}": plateau_start(w, obj, t) for t in REL_TOLS},  # plateau starts by each rule
                  f"log{LOG_FRAC:g}": plateau_start(w, obj, log_frac=LOG_FRAC)}
        bad = optimisation_failures(w, obj, FAIL_TOL)
        out += [{"panel": panel, "lam": lam, "width": wi, "objective": o, "train_loss": float(r["train_loss"]),
                 "test_loss": float(r["test_loss"]), "wall_time_s": float(r["wall_time_s"]), "not_at_minimum": wi in bad,
                 "trial_objectives": " ".join(f"{v:.6g}" for ww, v in zip(tw, tv) if ww == wi),
                 **{f"plateau_start_{k}": v for k, v in starts.items()}} for wi, o, r in zip(w, obj, rs)]
    out[0]["_panels"] = [
        dict(series=series["mnist"], title=f"MNIST (N = {cfg_m['data']['n_train']}), cross-entropy, L = 3", ylabel="loss"),
        dict(series=series["teacher"], title=f"teacher (N = {cfg_t['data']['n_train']}; depth 3, width 10), MSE, "
                                             f"λ = {lam_t:g}", ylabel="loss")]
    return out


def verdict(rows: list[dict], full: bool) -> Verdict:
    """Every curve's plateau (objective within 5 % of the best) starts by width PLATEAU_BY."""
    lines, ok = [], True
    for key in sorted({(r["panel"], r["lam"]) for r in rows}):
        rr = [r for r in rows if (r["panel"], r["lam"]) == key]
        start = rr[0]["plateau_start_0.05"]
        ok &= start is not None and start <= PLATEAU_BY
        bad = [r["width"] for r in rr if r["not_at_minimum"]]
        lines.append(f"  {key[0]} λ={key[1]:g}: plateau start (5 %) = {start}, (1 %) = {rr[0]['plateau_start_0.01']}, "
                     f"(log) = {rr[0][f'plateau_start_log{LOG_FRAC:g}']}; objective by width "
                     + ", ".join(f"{r['width']}: {r['objective']:.4g}" for r in rr)
                     + (f"; not at their minimum: {bad}" if bad else ""))
    return Verdict(bool(ok), "\n".join(lines))


def plot(rows: list[dict]) -> Figure:
    """Fig 2 / Prop 14–15: one panel per dict of the first row's `_panels`, in a row: loss against width (log x).

    A panel has series (each: widths, values, label, style '-' train or '--' test, optional trials=(widths,
    values) drawn as small dots), title, ylabel, optional marks (vertical dotted lines, e.g. N²/4) and yscale:
    log, or symlog (linear below 1, log above: for relative excesses in % that reach 0)."""
    panels = rows[0]["_panels"]
    fig = Figure(figsize=(5.0 * len(panels), 4), layout="tight")
    for ax, p in zip(fig.subplots(1, len(panels)), panels):
        marks = p.get("marks", ())
        for s in p["series"]:
            line, = ax.plot(s["widths"], s["values"], s.get("style", "-"), marker="o", ms=3, label=s["label"])
            if s.get("trials") is not None:
                ax.plot(*s["trials"], ".", ms=3, color=line.get_color(), alpha=0.5)
        for m in marks:
            ax.axvline(m, ls=":", c="grey")
        ax.set_xscale("log")
        if p.get("yscale") == "symlog":
            ax.set_yscale("symlog", linthresh=1.0)
            ax.set_ylim(bottom=-0.1)  # the quantities are ≥ 0 up to rounding
        else:
            ax.set_yscale("log")
        ticks = sorted({float(w) for s in p["series"] for w in s["widths"]} | {float(m) for m in marks})
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.set(xlabel="width", ylabel=p["ylabel"])
        ax.set_title(p["title"], fontsize=9)
        ax.legend(fontsize=7)
    return fig
