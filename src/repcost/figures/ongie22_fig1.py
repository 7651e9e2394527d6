"""Ongie & Willett Fig 1: weight decay promotes unit alignment with more linear layers (L = 2, 3, 4).

Paper (Fig 1 caption): nets with L − 1 linear layers plus one ReLU layer, trained with weight
decay to close to zero training loss; "as the number of linear layers increases, the learned
interpolating function will become closer to constant in directions perpendicular to a
low-dimensional subspace on which a parsimonious interpolant can be defined".
Data: 2-D inputs with labels y = sin(π uᵀx) (data=projection). Per L we report the singular
values of the effective inner matrix W = W_{L−1}⋯W_1 (s2/s1), the angle of its top right
singular vector to u, and how much the function varies perpendicular to u: RMS of u⊥ᵀ∇h over a
grid of [−1, 1]² divided by RMS of ‖∇h‖ (0 = a function of uᵀx only).
"""

from __future__ import annotations

import numpy as np

from ..analysis import path_norm, phi_L
from ..analysis.two_rays import alignment_summary, directional_variation, net_from_model
from ..plots.ongie import grid_values, surfaces_figure
from . import Verdict, quick_verdict

FIG_ID = "ongie22-fig1"
CLAIM = "Claim (Fig 1): more linear layers -> W closer to rank one and h closer to constant along u⊥."


def compute(runs) -> list[dict]:
    """One row per run (L, seed); `_surface`, `_s` (W's singular values), `_x`, `_y`, `_u` for the plot."""
    g = np.linspace(-1.0, 1.0, 41)
    grid = np.stack([m.ravel() for m in np.meshgrid(g, g)], axis=1)
    rows = []
    for run in sorted(runs, key=lambda r: (r.model.depth, r.spec.seed)):
        data, spec = run.data, run.spec
        net = net_from_model(run.model)
        u = np.asarray(data.meta["direction"])
        al = alignment_summary(net, u)
        rows.append({"L": run.model.depth, "seed": spec.seed, "width": spec.model.width, "lam": spec.train.lam,
                     **run.columns(), "C_L": run.summary["cost"], "R2": path_norm(net.W, net.a),
                     "R3": phi_L(net.W, net.a, 3), "n_units": al["n_units"], "s2_over_s1": al["s2_over_s1"],
                     "v1_angle_to_u_deg": al["v1_angle_to_w0_deg"], "perp_variation": directional_variation(net, grid, u),
                     "_surface": grid_values(net, lim=1.0), "_s": al["s"], "_x": data.x_train.numpy(),
                     "_y": data.y_train.numpy()[:, 0], "_u": u})
    return rows


def plot(rows: list[dict]):
    """The lowest seed's surface per L, with u and u⊥ marked, and W's normalised singular values."""
    shown = {}
    for r in rows:  # rows are sorted by (L, seed): the first row of each L is its lowest seed
        shown.setdefault(r["L"], r)
    u = rows[0]["_u"]
    panels = [dict(surface=r["_surface"], x=r["_x"], y=r["_y"],
                   title=f"L = {L}: s2/s1 = {r['s2_over_s1']:.2g}, perp. variation = {r['perp_variation']:.2g}",
                   arrows=[(u, "r", "label direction u"), (np.array([-u[1], u[0]]), "b", "u⊥")])
              for L, r in shown.items()]

    def bars(ax):
        width = 0.8 / len(shown)
        for j, (L, r) in enumerate(shown.items()):
            ax.bar(np.arange(r["_s"].size) + j * width, r["_s"] / r["_s"][0], width=width, label=f"L = {L}")
        n = max(r["_s"].size for r in shown.values())
        ax.set_xticks(np.arange(n) + 0.4 - width / 2, [f"$s_{i + 1}$" for i in range(n)])
        ax.set_title("singular values of W = W_{L−1}⋯W_1 (s_i / s_1)", fontsize=9)
        ax.set(ylabel="s_i / s_1", yscale="log")
        ax.legend(fontsize=7)

    return surfaces_figure(panels, len(shown), "Ongie & Willett Fig 1: learned interpolants, y = sin(π uᵀx)", [bars])


def verdict(rows: list[dict], full: bool) -> Verdict:
    """The mean perpendicular variation over seeds decreases with L."""
    Ls, pv, lines = sorted({r["L"] for r in rows}), [], []
    for L in Ls:
        rr = [r for r in rows if r["L"] == L]
        pv.append(np.mean([r["perp_variation"] for r in rr]))
        lines.append(f"  L = {L}: mean s2/s1 = {np.mean([r['s2_over_s1'] for r in rr]):.3g}, mean perp. variation = "
                     f"{pv[-1]:.3g}, max train loss {max(r['train_loss'] for r in rr):.1e}, critical points "
                     f"{sum(bool(r['critical_point']) for r in rr)}/{len(rr)}")
    ok = len(Ls) > 1 and all(b <= a for a, b in zip(pv, pv[1:]))
    lines.append(f"  perpendicular variation decreases with L: {'yes' if ok else 'NO'}")
    return quick_verdict(ok, lines, full, FIG_ID)
