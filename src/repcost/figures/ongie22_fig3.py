"""Ongie & Willett Fig 3 (+ Fig 6): two rays separated by 2π/3, w1 ∝ (2, 1); interpolants learned with L = 2 and L = 3.

Paper (Fig 3 caption, §5.2): the minimum-R2 interpolant has ReLU units along the rays; the
minimum-R3 interpolant (one linear layer) has units aligned with w0 = (w1 − w2)/‖w1 − w2‖, so it
does not vary perpendicular to w0; both interpolate the samples (Fig 6). Targets checked here:
the L = 3 net's effective inner matrix W = W2W1 has s2/s1 < 0.05 and its top right singular vector
within 10° of w0; the L = 2 net's units, weighted by |a_k|‖w_k‖, lie within 10° of the rays.
ongie22_fig2 (rays at 0.55π and 0.52π) draws and tabulates its nets with this module's functions.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..analysis import path_norm, phi_L
from ..analysis.two_rays import alignment_summary, f_and_g_for_data, line_angle, net_from_model, prop52_margin
from ..plots.ongie import grid_values, surfaces_figure
from . import Verdict, quick_verdict

FIG_ID = "ongie22-fig3"
TARGET = {"s2_over_s1": 0.05, "v1_deg": 10.0, "units_deg": 10.0}
CLAIM = ("Paper (Fig 3, §5.2): the L = 2 net's units lie along the rays; the L = 3 net's effective W is rank one "
         "along w0 (targets: s2/s1 < 0.05, top right singular vector within 10° of w0, L = 2 units within 10° of "
         "the rays).")
TITLE = ("Ongie & Willett Fig 3/6: two rays at 2π/3 — learned (L = 2, 3) and constructed (f, g) interpolants; "
         "red line = span(w0)")


def compute(runs) -> list[dict]:
    """A row per trained net, then constructed f and g per angle (R2 = path norm, R3 = Φ3 of Lemma 3.4, the
    alignment of the effective inner matrix); the first row carries the per-angle nets and data for the plot
    (`_per_angle`)."""
    rows, per_angle = [], {}
    min_seed = min(r.spec.seed for r in runs)
    for r in runs:
        model, data, spec = r.model, r.data, r.spec
        key = round(float(data.meta["angle"]) / math.pi, 4)
        net = net_from_model(model)
        al = alignment_summary(net, data.meta["w0"], [data.meta["w1"], data.meta["w2"]])
        rows.append({"kind": "trained", "angle_pi": key, "L": model.depth, "seed": spec.seed,
                     "width": spec.model.width, "lam": spec.train.lam, **r.columns(), "C_L": r.summary["cost"],
                     "R2": path_norm(net.W, net.a), "R3": phi_L(net.W, net.a, 3), "n_units": al["n_units"],
                     "s2_over_s1": al["s2_over_s1"], "v1_angle_to_w0_deg": al["v1_angle_to_w0_deg"],
                     "unit_angle_to_rays_deg": al["unit_angle_to_rays_deg"]})
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


def plot(rows: list[dict], title: str = TITLE):
    """Per angle, a surface per net (samples in black, span(w0) red) and the interpolation check along the rays."""
    panels, bottom = [], []
    for key, slot in sorted(rows[0]["_per_angle"].items(), reverse=True):
        data = slot["data"]
        nets = {f"L = {L} (trained)": n for L, n in sorted(slot["nets"].items())}
        nets.update({"f (constructed)": slot["f"], "g (constructed)": slot["g"]})
        panels += [dict(surface=grid_values(h), title=f"{name}, rays {key:g}π", x=data.x_train.numpy(),
                        y=data.y_train.numpy()[:, 0], span=(data.meta["w0"], "r")) for name, h in nets.items()]
        bottom.append(partial(_ray_check, data=data, nets=nets, title=f"interpolation check (Fig 6), rays {key:g}π"))
    return surfaces_figure(panels, 4, title, bottom)


def _ray_check(ax, data, nets: dict, title: str) -> None:
    """Ongie Fig 6: each net along the two rays (t = distance from the origin), and the samples."""
    ray, y, t = np.asarray(data.meta["ray"]), data.y_train.numpy()[:, 0], np.linspace(0.0, 1.1, 100)
    rays = [np.asarray(data.meta[f"w{j + 1}"], dtype=np.float64) for j in range(2)]
    for j, w in enumerate(rays):
        ax.plot(data.x_train.numpy()[ray == j] @ w, y[ray == j], "ko", ms=4, label="samples" if j == 0 else None)
    for k, (name, h) in enumerate(nets.items()):
        for j, w in enumerate(rays):  # h(t·w_j) on each ray
            ax.plot(t, np.asarray(h(t[:, None] * w[None, :])).reshape(-1), ("-", "--", ":", "-.")[k % 4],
                    color=f"C{j}", lw=1.2, label=f"{name}, ray {j + 1}")
    ax.set_xlabel("t (distance along the ray)")
    ax.set_ylabel("value")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6)


def table(rows: list[dict]) -> list[str]:
    """Every net's costs and alignment, one line each."""
    out = []
    for r in rows:
        if r["kind"] == "trained":
            out.append(f"  trained {r['angle_pi']:.3f}π L={r['L']} seed {r['seed']}: train loss {r['train_loss']:.2e}, "
                       f"R2 {r['R2']:.4f}, R3 {r['R3']:.4f}, s2/s1 {r['s2_over_s1']:.1e}, v1∠w0 "
                       f"{r['v1_angle_to_w0_deg']:.1f}°, units∠rays {r['unit_angle_to_rays_deg']:.1f}°, "
                       f"critical point: {r['critical_point']}")
        else:
            out.append(f"  {r['kind']} {r['angle_pi']:.3f}π: R2 {r['R2']:.4f}, R3 {r['R3']:.4f} (interp err "
                       f"{r['max_interp_error']:.0e}, Prop 5.2 margin {r['prop52_margin']:+.3f})")
    return out


def verdict(rows: list[dict], full: bool) -> Verdict:
    """Every L = 3 net rank one along w0, every L = 2 net's units along the rays (the targets above)."""
    trained = [r for r in rows if r["kind"] == "trained"]
    ok = all(r["s2_over_s1"] < TARGET["s2_over_s1"] and r["v1_angle_to_w0_deg"] < TARGET["v1_deg"]
             for r in trained if r["L"] == 3)
    ok &= all(r["unit_angle_to_rays_deg"] < TARGET["units_deg"] for r in trained if r["L"] == 2)
    return quick_verdict(ok, table(rows), full, FIG_ID)
