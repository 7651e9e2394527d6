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

import time

import numpy as np

from repcost.analysis import path_norm, phi_L
from repcost.analysis.two_rays import alignment_summary, directional_variation, net_from_model
from repcost.figures import figure_args, load_run, run_figure, save_figure, sweep_for
from repcost.plots.ongie import add_bar_panel, grid_values, surfaces_figure

FIG = "ongie22-fig1"


def main():
    a = figure_args(__doc__).parse_args()
    t0 = time.time()
    runs = sweep_for(FIG, a)
    g = np.linspace(-1.0, 1.0, 41)
    grid = np.stack([m.ravel() for m in np.meshgrid(g, g)], axis=1)
    rows, shown = [], {}
    for r in runs:
        model, data, summ, spec = load_run(r["path"])
        net = net_from_model(model)
        u = np.asarray(data.meta["direction"])
        al = alignment_summary(net, u)
        rows.append({"L": model.depth, "seed": spec.seed, "width": spec.model.width, "lam": spec.train.lam,
                     "train_loss": summ["train_loss"], "steps": summ["steps"], "wall_time_s": summ["wall_time_s"],
                     "C_L": summ["cost"], "R2": path_norm(net.W, net.a), "R3": phi_L(net.W, net.a, 3),
                     "n_units": al["n_units"], "s2_over_s1": al["s2_over_s1"],
                     "v1_angle_to_u_deg": al["v1_angle_to_w0_deg"],
                     "perp_variation": directional_variation(net, grid, u)})
        if model.depth not in shown or spec.seed < shown[model.depth][0]:
            shown[model.depth] = (spec.seed, net, data, al["s"])
    Ls = sorted(shown)
    data = shown[Ls[0]][2]
    x, y = data.x_train.numpy(), data.y_train.numpy()[:, 0]
    u = np.asarray(data.meta["direction"])
    titles = []
    for L in Ls:
        rr = [r for r in rows if r["L"] == L and r["seed"] == shown[L][0]][0]
        titles.append(f"L = {L}: s2/s1 = {rr['s2_over_s1']:.2g}, perp. variation = {rr['perp_variation']:.2g}")
    fig = surfaces_figure([grid_values(shown[L][1], lim=1.0) for L in Ls], titles, x, y,
                          arrows=[(u, "r", "label direction u"), (np.array([-u[1], u[0]]), "b", "u⊥")], ncols=len(Ls) + 1,
                          suptitle="Ongie & Willett Fig 1: learned interpolants, y = sin(π uᵀx)")
    ncols = len(Ls) + 1
    add_bar_panel(fig, (1, ncols, ncols), {f"L = {L}": shown[L][3] / shown[L][3][0] for L in Ls},
                  "singular values of W = W_{L−1}⋯W_1 (s_i / s_1)", "s_i / s_1")
    save_figure(fig, FIG, rows, a)
    print(f"\n{FIG}: {len(rows)} runs, {time.time() - t0:.0f} s")
    print(" L seed  train_loss    C_L      R2      R3    units  s2/s1    v1∠u   perp. variation")
    for r in sorted(rows, key=lambda r: (r["L"], r["seed"])):
        print(f" {r['L']}  {r['seed']}    {r['train_loss']:.2e}  {r['C_L']:.4f}  {r['R2']:.4f}  {r['R3']:.4f}  "
              f"{r['n_units']:4d}  {r['s2_over_s1']:.1e}  {r['v1_angle_to_u_deg']:5.1f}°  {r['perp_variation']:.3f}")
    print("Claim (Fig 1): more linear layers -> W closer to rank one and h closer to constant along u⊥.")
    for L in Ls:
        rr = [r for r in rows if r["L"] == L]
        print(f"  L = {L}: mean s2/s1 = {np.mean([r['s2_over_s1'] for r in rr]):.3g}, mean perp. variation = "
              f"{np.mean([r['perp_variation'] for r in rr]):.3g}, max train loss {max(r['train_loss'] for r in rr):.1e}")
    pv = [np.mean([r["perp_variation"] for r in rows if r["L"] == L]) for L in Ls]
    mono = all(b <= a_ for a_, b in zip(pv, pv[1:]))
    print(f"  perpendicular variation decreases with L: {mono} -> {'AGREES' if mono else 'DISAGREES'}")


if __name__ == "__main__":
    run_figure(main)
