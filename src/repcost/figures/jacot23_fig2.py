"""Jacot 2023 Fig 2: decision regions on four translated inverted-S classes, depth 2 vs 9, with and without L2.

Paper (Fig 2 caption, §5 "Multiclass classification"): "The class boundaries in shallow networks
(A,B) feature tripoints, which are not observed in deeper networks (C,D)" (L = 2 vs L = 9), and
"the presence or absence of L2-regularization has little effect on the final shape".
A tripoint = a point where >= 3 class regions meet, counted on a grid (repcost.analysis.decision).
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from ..analysis.decision import count_tripoints, decision_grid, grid_limits
from . import Verdict, quick_verdict

FIG_ID = "jacot23-fig2"
GRID = 400
# windows: the data's bounding box widened by MARGIN × its larger side. Tripoints are counted in
# both; the figure shows (and the verdict uses) the wide one, where a shallow net's stripes end.
MARGIN_DATA, MARGIN = 0.3, 1.0
CLAIM = "Paper: tripoints at L = 2 (panels A, B), none at L = 9 (C, D); L2 has little effect."


def _grid(model, x, margin: float):
    xlim, ylim = grid_limits(x, margin)
    g = decision_grid(model, xlim, ylim, n=GRID, ny=int(GRID * (ylim[1] - ylim[0]) / (xlim[1] - xlim[0])))
    return g, 0.02 * (xlim[1] - xlim[0])  # a junction must show three classes within 2 % of the window width


def compute(runs) -> list[dict]:
    """One row per (depth, λ): tripoints in the wide and the data window, accuracy; the grid for the plot."""
    rows = []
    for run in sorted(runs, key=lambda r: (r.spec.model.depth, r.spec.train.lam)):
        model, data, summ = run.model, run.data, run.summary
        x, y = data.x_train.numpy(), data.y_train.numpy()
        g, sep = _grid(model, x, MARGIN)
        tp_raw, tp = count_tripoints(g), count_tripoints(g, min_separation=sep)
        g0, sep0 = _grid(model, x, MARGIN_DATA)
        tp0 = count_tripoints(g0, min_separation=sep0)
        acc = float((model(data.x_train).argmax(1) == data.y_train).double().mean())
        L, lam = model.depth, run.spec.train.lam
        rows.append({"depth": L, "lam": lam, "tripoints": tp.count, "tripoints_unfiltered": tp_raw.count,
                     "tripoints_data_window": tp0.count,
                     "tripoint_xy": ";".join(f"{p[0]:.2f},{p[1]:.2f}" for p in tp.points),
                     "train_acc": acc, **run.columns("test_loss", "param_sq_norm_per_depth"),
                     "_panel": {"labels": g.labels, "extent": (g.xs[0], g.xs[-1], g.ys[0], g.ys[-1]), "x": x, "y": y,
                                "n_classes": data.n_classes, "tripoints": tp.points,
                                "title": f"L={L}, λ={lam:g}: {tp.count} tripoint(s), train acc {acc:.2f}, "
                                         f"‖θ‖²/L={summ['param_sq_norm_per_depth']:.1f}"}})
    return rows


def plot(rows: list[dict]):
    """Decision regions, a row per depth and a column per λ, tripoints marked."""
    ncols = len({r["lam"] for r in rows})
    nrows = -(-len(rows) // ncols)
    fig = Figure(figsize=(5 * ncols, 3.2 * nrows), layout="tight")
    axes = np.atleast_1d(fig.subplots(nrows, ncols)).ravel()
    for ax, p in zip(axes, [r["_panel"] for r in rows]):
        k = p["n_classes"]
        cmap = ListedColormap([f"C{c}" for c in range(k)])
        ax.imshow(p["labels"], origin="lower", extent=p["extent"], cmap=cmap, vmin=-0.5, vmax=k - 0.5,
                  alpha=0.35, aspect="auto", interpolation="nearest")
        ax.scatter(p["x"][:, 0], p["x"][:, 1], c=p["y"], cmap=cmap, vmin=-0.5, vmax=k - 0.5, s=6)
        tp = np.asarray(p["tripoints"]).reshape(-1, 2)
        if len(tp):
            ax.plot(tp[:, 0], tp[:, 1], "k*", ms=12, mfc="yellow", label=f"{len(tp)} tripoint(s)")
            ax.legend(loc="lower left", fontsize=7)
        ax.set_title(p["title"], fontsize=9)
        ax.set_xticks([]), ax.set_yticks([])
    for ax in axes[len(rows):]:
        ax.axis("off")
    return fig

def verdict(rows: list[dict], full: bool) -> Verdict:
    """Reproduced when every shallowest net has a tripoint and no deepest net has one (wide window)."""
    lines = [f"  L={r['depth']}, λ={r['lam']:g}: {r['tripoints']} tripoint(s) in the wide window "
             f"({r['tripoints_unfiltered']} before the sliver filter), {r['tripoints_data_window']} in the data window, "
             f"train acc {r['train_acc']:.3f}, critical point: {r['critical_point']}" for r in rows]
    lo, hi = min(r["depth"] for r in rows), max(r["depth"] for r in rows)
    shallow = [r["tripoints"] for r in rows if r["depth"] == lo]
    deep = [r["tripoints"] for r in rows if r["depth"] == hi]
    ok = lo < hi and min(shallow) > 0 and max(deep) == 0
    lines.append(f"  measured (wide window, margin {MARGIN}): shallow {shallow}, deep {deep}")
    return quick_verdict(ok, lines, full, FIG_ID)
