"""Ongie & Willett Figs 2, 3 and 6: two rays, interpolants learned with L = 2 and L = 3 beside §5.2's f and g.

Shared by the figure modules ongie22_fig2 (rays at 0.55π and 0.52π) and ongie22_fig3 (2π/3): per
trained net, R2 (path norm), R3 (Φ3, Lemma 3.4) and the alignment of its effective inner matrix;
per angle, §5.2's constructed f (units along the rays) and g (units along ±w0).
"""

from __future__ import annotations

import math

import numpy as np

from ..analysis import path_norm, phi_L
from ..analysis.two_rays import (alignment_summary, along_rays, f_and_g_for_data, line_angle,
                                 net_from_model, prop52_margin)
from ..plots.ongie import grid_values, surfaces_figure


def analyse_runs(runs):
    """Rows: one per trained net, plus constructed f and g per angle; the first carries the per-angle nets and data
    for the plot (`_per_angle`)."""
    rows, per_angle = [], {}
    min_seed = min(r.spec.seed for r in runs)
    for r in runs:
        model, data, summ, spec = r.model, r.data, r.summary, r.spec
        ang = float(data.meta["angle"])
        key = round(ang / math.pi, 4)
        net = net_from_model(model)
        w1, w2 = data.meta["w1"], data.meta["w2"]
        al = alignment_summary(net, data.meta["w0"], [w1, w2])
        rows.append({"kind": "trained", "angle_pi": key, "L": model.depth, "seed": spec.seed,
                     "width": spec.model.width, "lam": spec.train.lam, "train_loss": summ["train_loss"],
                     "steps": summ["steps"], "wall_time_s": summ["wall_time_s"], "C_L": summ["cost"],
                     "R2": path_norm(net.W, net.a), "R3": phi_L(net.W, net.a, 3),
                     "n_units": al["n_units"], "s2_over_s1": al["s2_over_s1"],
                     "v1_angle_to_w0_deg": al["v1_angle_to_w0_deg"],
                     "unit_angle_to_rays_deg": al["unit_angle_to_rays_deg"],
                     "critical_point": summ.get("critical_point")})
        slot = per_angle.setdefault(key, {"data": data, "nets": {}})
        if spec.seed == min_seed:
            slot["nets"][model.depth] = net
    for key, slot in per_angle.items():
        f, g, units = f_and_g_for_data(slot["data"])
        slot["f"], slot["g"] = f, g
        x, y = slot["data"].x_train.numpy(), slot["data"].y_train.numpy()[:, 0]
        margin = prop52_margin(key * math.pi, units[0][0], units[1][0])
        for name, h in (("f (units along rays)", f), ("g (units along ±w0)", g)):
            rows.append({"kind": name, "angle_pi": key, "theta_prop52_pi": line_angle(key * math.pi) / math.pi,
                         "R2": path_norm(h.W, h.a), "R3": phi_L(h.W, h.a, 3),
                         "max_interp_error": float(np.max(np.abs(h(x) - y))), "prop52_margin": margin})
    rows[0]["_per_angle"] = per_angle
    return rows


def draw(rows: list[dict], title: str):
    per_angle = rows[0]["_per_angle"]
    surfaces, titles, ray_panels, panel_data = [], [], [], []
    for key, slot in sorted(per_angle.items(), reverse=True):
        data = slot["data"]
        y = data.y_train.numpy()[:, 0]
        nets = {f"L = {L} (trained)": n for L, n in sorted(slot["nets"].items())}
        nets.update({"f (constructed)": slot["f"], "g (constructed)": slot["g"]})
        for name, h in nets.items():
            surfaces.append(grid_values(h))
            titles.append(f"{name}, rays {key:g}π")
            panel_data.append(data)
        t = np.linspace(0.0, 1.1, 100)
        ts = [data.x_train.numpy()[np.asarray(data.meta["ray"]) == j] @ np.asarray(data.meta[f"w{j + 1}"])
              for j in range(2)]
        ys = [y[np.asarray(data.meta["ray"]) == j] for j in range(2)]
        ray_panels.append({"title": f"interpolation check (Fig 6), rays {key:g}π", "t_samples": ts,
                           "y_samples": ys, "t_grid": t,
                           "curves": {name: along_rays(h, data, t) for name, h in nets.items()}})
    fig = surfaces_figure(surfaces, titles, None, None, ncols=4, suptitle=title, ray_panels=ray_panels)
    # the samples differ per angle: each surface panel gets its own angle's samples and span(w0)
    for ax, d in zip([ax for ax in fig.axes if hasattr(ax, "get_zlim")], panel_data):
        ax.scatter(d.x_train[:, 0].numpy(), d.x_train[:, 1].numpy(), d.y_train[:, 0].numpy(), color="k", s=12,
                   depthshade=False)
        w0 = np.asarray(d.meta["w0"])
        zmin = ax.get_zlim()[0]
        ax.plot([-w0[0], w0[0]], [-w0[1], w0[1]], [zmin, zmin], "r-", lw=1.5)
    return fig
