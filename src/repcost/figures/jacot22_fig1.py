"""Jacot, Golikov, Hongler, Gabriel 2022, Fig 1: attraction/repulsion forces and neuron alignment.

L = 3 ReLU net, widths 50, MNIST digits 7/8/9 (N = 42), full-batch GD on cross-entropy + λ‖θ‖².
Panels (a, c): the N data points (columns of Z_ℓ) of hidden layers ℓ = 1, 2 projected on their top-2
(uncentred) principal components; (b, d): the 50 neurons (rows of Z_ℓ). Green = attraction force
−∂_{Z_ℓ}‖Z_ℓ(Z^σ_{ℓ−1})⁺‖², red = repulsion force −∂_{Z_ℓ}‖Z_{ℓ+1}(Z^σ_ℓ)⁺‖² (Tikhonov pseudo-inverse).
Grey dashed rays: one per group of aligned neurons (cosine of pre-activations > COS).
The full preset trains seed 0, the quick one (5k GD steps) seeds 0, 1, 2: each seed is judged by the same
rule, the verdict is the pass rate, and the plot shows the first seed.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from matplotlib.figure import Figure

from ..analysis.alignment import merge_units, neuron_groups
from ..analysis.critical import rebalance
from ..analysis.reformulation import layer_forces, project_points_and_forces, reformulated_loss
from ..errors import RepcostError
from . import per_seed

FIG_ID = "jacot22-fig1"
COS = 0.99        # neurons k, k' are aligned if cos(Z_{ℓ,k}, Z_{ℓ,k'}) > COS (pre-activations over the data)
DEAD = 1e-3       # a neuron is dead if ‖σ(Z_{ℓ,k})‖ ≤ DEAD · max_k' ‖σ(Z_{ℓ,k'})‖
RIDGE_REL = 1e-6  # Tikhonov ridge ρ = RIDGE_REL · ‖Z^σ‖²_op of the matrix being pseudo-inverted
RAYS = 3          # the paper's reading: each hidden layer's neurons align along 3 rays (one per class)
CLAIM = "Paper (Fig 1): neurons of each hidden layer align along 3 rays."


def compute(runs) -> list[dict]:
    """A row per (seed, hidden layer): aligned groups, dead neurons, force balance, the merged net; each seed's
    first row holds `_panels`, and the plot draws the first seed's."""
    runs = sorted(runs, key=lambda r: r.spec.seed)
    return [row for run in runs for row in _run_rows(run)]


def _run_rows(run) -> list[dict]:
    model, data, summary, spec = run.model, run.data, run.summary, run.spec
    x, y = data.x_train.double(), data.y_train
    with torch.no_grad():
        hs = model.hidden(x)
    scale = max(float(torch.linalg.matrix_norm(h.post.detach(), ord=2)) for h in hs) ** 2
    if scale == 0:  # weight decay won: no neuron is active, there are no rays and no forces to draw
        raise RepcostError(f"every hidden neuron of {run.path} is inactive on the data (‖θ‖² = "
                           f"{float(summary['param_sq_norm']):.3g}, train loss {float(summary['train_loss']):.4g}): "
                           "the net collapsed to a constant; use a smaller λ")
    ridge = RIDGE_REL * scale
    digits = spec.data.digit_list()
    panels, rows = [], []
    for ell, f in enumerate(layer_forces(model, x, ridge=ridge), start=1):
        h = hs[ell - 1]
        groups, dead = neuron_groups(h.pre, h.post, threshold=COS, dead_tol=DEAD)
        by_cos = {c: len(neuron_groups(h.pre, h.post, threshold=c, dead_tol=DEAD)[0]) for c in (0.9, 0.95, 0.99, 0.999)}
        mass = sorted((float((h.pre[:, g].detach() ** 2).sum()) for g in groups), reverse=True)
        pn = project_points_and_forces(f, "neurons")  # points, attraction, repulsion
        panels.append(dict(**project_points_and_forces(f, "data"), labels=y.numpy(),
                           label_names=[str(d) for d in digits], title=f"({'ac'[ell - 1]}) layer {ell}: {len(y)} data points"))
        panels.append(dict(**pn, rays=[pn["points"][g].sum(0) for g in groups],  # one ray per group of aligned neurons
                           title=f"({'bd'[ell - 1]}) layer {ell}: {f['Z'].shape[0]} neurons, {len(groups)} groups, "
                                 f"{len(dead)} dead"))
        att, rep = f["attraction"], f["repulsion"]
        rows.append({"seed": spec.seed, "layer": ell, "groups": len(groups), "dead": len(dead),
                     "top3_mass": sum(mass[:3]) / sum(mass) if mass else float("nan"),
                     **{f"groups_cos{c:g}": v for c, v in by_cos.items()},
                     "group_sizes": " ".join(str(len(g)) for g in sorted(groups, key=len, reverse=True)),
                     "force_balance": float((att + rep).norm() / (att.norm() + rep.norm())), "ridge": ridge})
    merged, widths = copy.deepcopy(model), [r["groups"] for r in rows]
    merge_units(merged, x, COS, DEAD)
    rebalance(merged)
    with torch.no_grad():
        out, mout = model(x), merged(x)
        rel = float((mout - out).norm() / out.norm())
    r = reformulated_loss(model, x, y, spec.train.lam, spec.train.loss, spec.train.reg_scale)
    for o in rows:
        o.update(merged_widths=" ".join(map(str, widths)), merged_rel_output_change=rel,
                 merged_sq_norm=float(merged.param_sq_norm().detach()), sq_norm=float(model.param_sq_norm().detach()),
                 reformulated=r["reformulated"], original=r["original"], **run.columns(),
                 clarke=summary.get("critical.clarke_stationarity", summary.get("critical.stationarity")))
    rows[0]["_panels"] = panels
    return rows


def plot(rows: list[dict]):
    """The first seed's panels: 2-D projected points, attraction (green) and repulsion (red) arrows scaled to the
    longest at 15 % of the cloud's extent, rays (grey dashed) of the groups of aligned neurons."""
    panels = rows[0]["_panels"]
    fig = Figure(figsize=(4.2 * len(panels), 4), layout="tight")
    for ax, p in zip(fig.subplots(1, len(panels)), panels):
        pts, att, rep = p["points"], p["attraction"], p["repulsion"]
        k = 0.15 * (float(np.ptp(pts, axis=0).max()) or 1.0) / (max(float(np.linalg.norm(f, axis=1).max())
                                                                    for f in (att, rep)) or 1.0)
        if "labels" in p:
            for name, lab in zip(p["label_names"], np.unique(p["labels"])):
                ax.scatter(*pts[p["labels"] == lab].T, s=14, zorder=3, label=name)
            ax.legend(fontsize=7, loc="best")
        else:
            ax.scatter(pts[:, 0], pts[:, 1], s=14, c="k", zorder=3)
        for f, col in ((att, "tab:green"), (rep, "tab:red")):
            ax.quiver(pts[:, 0], pts[:, 1], k * f[:, 0], k * f[:, 1], color=col, angles="xy", scale_units="xy",
                      scale=1.0, width=0.004, alpha=0.8)
        r = float(np.abs(pts).max()) * 1.1
        for d in p.get("rays", ()):
            d = np.asarray(d, dtype=float) / (np.linalg.norm(d) or 1.0)
            ax.plot([0, r * d[0]], [0, r * d[1]], ls="--", c="grey", lw=0.8, zorder=1)
        ax.scatter([0], [0], marker="+", c="grey", s=30)
        ax.set_title(p["title"], fontsize=9)
        ax.set(xlabel="PC 1", ylabel="PC 2")
    return fig


@per_seed(f"{RAYS} rays in every layer")
def verdict(rows: list[dict]) -> tuple[bool, list[str]]:
    """Per seed (the full preset trains one, the quick one three): reproduced when every hidden layer's active
    neurons form RAYS groups (cos > COS); over several seeds, when most seeds are."""
    lines = [f"  layer {r['layer']}: {r['groups']} groups of aligned neurons (cos > {COS}), sizes {r['group_sizes']}, "
             f"{r['dead']} dead; top-3 groups hold {r['top3_mass']:.1%} of Σ_k‖Z_ℓ,k‖²; ‖att + rep‖/(‖att‖ + ‖rep‖) = "
             f"{r['force_balance']:.3f}" for r in rows]
    r0 = rows[0]
    lines.append(f"  merged network widths {r0['merged_widths']}: relative output change {r0['merged_rel_output_change']:.2e}, "
                 f"‖θ‖² {r0['sq_norm']:.4g} -> {r0['merged_sq_norm']:.4g}; Prop 1: L^r(Z) = {r0['reformulated']:.6g} vs "
                 f"L_λ(W) = {r0['original']:.6g}; Clarke measure {r0['clarke']:.2g}, critical point: {r0['critical_point']}")
    return all(r["groups"] == RAYS for r in rows), lines
