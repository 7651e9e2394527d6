"""Jacot, Golikov, Hongler, Gabriel 2022, Fig 1: attraction/repulsion forces and neuron alignment.

L = 3 ReLU net, widths 50, MNIST digits 7/8/9 (N = 42), full-batch GD on cross-entropy + λ‖θ‖².
Panels (a, c): the N data points (columns of Z_ℓ) of hidden layers ℓ = 1, 2 projected on their top-2
(uncentred) principal components; (b, d): the 50 neurons (rows of Z_ℓ). Green = attraction force
−∂_{Z_ℓ}‖Z_ℓ(Z^σ_{ℓ−1})⁺‖², red = repulsion force −∂_{Z_ℓ}‖Z_{ℓ+1}(Z^σ_ℓ)⁺‖² (Tikhonov pseudo-inverse).
Grey dashed rays: one per group of ≥ 2 aligned neurons (cosine of pre-activations > COS).
"""

from __future__ import annotations

import torch

from repcost.analysis.alignment import merge_neurons, neuron_groups
from repcost.analysis.forces import layer_forces, project_points_and_forces
from repcost.analysis.reformulation import reformulated_loss
from repcost.errors import RepcostError
from repcost.train.objective import objective, reg_scale_factor
from repcost.figures import figure_args, load_run, run_figure, save_figure, sweep_for
from repcost.plots.jacot22 import forces_figure

FIG = "jacot22-fig1"
COS = 0.99        # neurons k, k' are aligned if cos(Z_{ℓ,k}, Z_{ℓ,k'}) > COS (pre-activations over the data)
DEAD = 1e-3       # a neuron is dead if ‖σ(Z_{ℓ,k})‖ ≤ DEAD · max_k' ‖σ(Z_{ℓ,k'})‖
RIDGE_REL = 1e-6  # Tikhonov ridge ρ = RIDGE_REL · ‖Z^σ‖²_op of the matrix being pseudo-inverted


def main():
    args = figure_args(__doc__.splitlines()[0]).parse_args()
    rows = sweep_for(FIG, args)
    model, data, summary, spec = load_run(rows[0]["path"])
    x, y = data.x_train.double(), data.y_train
    with torch.no_grad():
        hs = model.hidden(x)
    scale = max(float(torch.linalg.matrix_norm(h.post.detach(), ord=2)) for h in hs) ** 2
    if scale == 0:  # weight decay won: no neuron is active, there are no rays and no forces to draw
        raise RepcostError(f"every hidden neuron of {rows[0]['path']} is inactive on the data (‖θ‖² = "
                           f"{float(summary['param_sq_norm']):.3g}, train loss {float(summary['train_loss']):.4g}): "
                           "the net collapsed to a constant; use a smaller λ")
    ridge = RIDGE_REL * scale
    forces = layer_forces(model, x, ridge=ridge)
    digits = spec.data.digit_list()
    panels, out_rows, counts = [], [], []
    for l, f in enumerate(forces, start=1):
        h = hs[l - 1]
        groups, dead = neuron_groups(h.pre, h.post, threshold=COS, dead_tol=DEAD)
        counts.append(len(groups))
        by_cos = {c: len(neuron_groups(h.pre, h.post, threshold=c, dead_tol=DEAD)[0]) for c in (0.9, 0.95, 0.99, 0.999)}
        big = [g for g in groups if len(g) > 1]
        mass = sorted((float((h.pre[:, g].detach() ** 2).sum()) for g in groups), reverse=True)
        top3 = sum(mass[:3]) / sum(mass) if mass else float("nan")
        pd = project_points_and_forces(f["Z"], f, "data")
        pn = project_points_and_forces(f["Z"], f, "neurons")
        rays = [pn["points"][g].sum(0) for g in big]  # one ray per group of ≥ 2 aligned neurons
        panels.append(dict(points=pd["points"], attraction=pd["attraction"], repulsion=pd["repulsion"],
                           labels=y.numpy(), label_names=[str(d) for d in digits],
                           title=f"({'ac'[l - 1]}) layer {l}: {len(y)} data points"))
        panels.append(dict(points=pn["points"], attraction=pn["attraction"], repulsion=pn["repulsion"],
                           rays=rays, title=f"({'bd'[l - 1]}) layer {l}: {f['Z'].shape[0]} neurons, "
                                            f"{len(groups)} groups, {len(dead)} dead"))
        att, rep = f["attraction"], f["repulsion"]
        balance = float((att + rep).norm() / (att.norm() + rep.norm()))
        print(f"layer {l}: {len(groups)} groups of aligned neurons (cos > {COS}), sizes "
              f"{sorted((len(g) for g in groups), reverse=True)}, {len(dead)} dead; "
              f"{len(big)} groups with ≥ 2 neurons; groups by cosine threshold {by_cos}; top-3 groups hold {top3:.1%} of Σ_k‖Z_ℓ,k‖²; ‖att + rep‖/(‖att‖ + ‖rep‖) = {balance:.3f}")
        out_rows.append({"layer": l, "groups": len(groups), "dead": len(dead),
                         "top3_mass": top3, **{f"groups_cos{c:g}": v for c, v in by_cos.items()}, "group_sizes": " ".join(str(len(g)) for g in sorted(groups, key=len, reverse=True)),
                         "force_balance": balance, "ridge": ridge})
    merged, widths, _ = merge_neurons(model, x, threshold=COS, dead_tol=DEAD)
    with torch.no_grad():
        out, mout = model(x), merged(x)
        rel = float((mout - out).norm() / out.norm())
        agree = float((mout.argmax(1) == out.argmax(1)).double().mean())
    # how close to a critical point of L_λ: ‖∇_θ L_λ‖ / ‖∇_θ λ‖θ‖²‖ (0 at a critical point)
    params = model.regularised_params()
    obj = objective(model, x, y, spec.train.loss, spec.train.lam, spec.train.reg_scale)[0]
    grads = torch.autograd.grad(obj, params)
    s_fac = spec.train.lam * reg_scale_factor(spec.train.reg_scale, model.depth)
    stationarity = float(torch.sqrt(sum((g ** 2).sum() for g in grads))
                         / torch.sqrt(sum(((2 * s_fac * p.detach()) ** 2).sum() for p in params)))
    kinks = [int((h.pre.abs() <= 1e-6 * h.pre.abs().max()).sum()) for h in hs]
    print(f"stationarity ‖∇L_λ‖/‖∇(λ‖θ‖²)‖ = {stationarity:.3f}; pre-activations at the ReLU kink (|Z| ≤ 1e-6 max) "
          f"per layer: {kinks} of {x.shape[0]}×{model.weights[0].shape[0]}")
    r = reformulated_loss(model, x, y, spec.train.lam, spec.train.loss, spec.train.reg_scale)
    print(f"merged network widths {widths}: relative output change {rel:.2e}, same class on {agree:.0%} of "
          f"points, ‖θ‖² {float(model.param_sq_norm().detach()):.4g} -> {float(merged.param_sq_norm().detach()):.4g}")
    print(f"Prop 1: L^r(Z) = {r['reformulated']:.6g} vs L_λ(W) = {r['original']:.6g}; train loss "
          f"{summary['train_loss']:.4g}, steps {summary['steps']}, wall {summary['wall_time_s']:.0f} s")
    for o in out_rows:
        o.update(merged_widths=" ".join(map(str, widths)), merged_rel_output_change=rel,
                 merged_sq_norm=float(merged.param_sq_norm().detach()), sq_norm=float(model.param_sq_norm().detach()),
                 reformulated=r["reformulated"], original=r["original"], train_loss=summary["train_loss"],
                 steps=summary["steps"], wall_time_s=summary["wall_time_s"], stationarity=stationarity)
    fig = forces_figure(panels)
    save_figure(fig, FIG, out_rows, args)
    print(f"paper (Fig 1): neurons of each hidden layer align along 3 rays. measured: group counts "
          f"{counts} (cos > {COS}), merged widths {widths}")


if __name__ == "__main__":
    run_figure(main)
