"""Ongie & Willett Fig 4: R2 and R3 costs of §5.2's f (units along the rays) and g (units along ±w0) vs ray angle.

Analysis only (no training). The samples (points per ray, labels, w1) come from the preset
configs/experiment/ongie22-fig4[-quick].yaml; for each ray separation α in (π/2, π) we build f
and g (both interpolate, checked), and compute R2 = path norm (Ongie eq. 13) and R3 = Φ3
(Lemma 3.4, numerical) with the analysis library. The yellow region is where Prop 5.2's
sufficient condition 1/cos²(θ/2) ≤ 1 + 4‖a1‖₁‖a2‖₁/‖a‖₁²·|sin θ| holds, with θ = π − α the
smallest angle between the lines of w1 and w2.
Paper (Prop 5.2, Fig 4 caption): R2(f) < R2(g) always; R3(g) < R3(f) wherever the condition
holds; "for some values of θ, the function f with unaligned units has lower R3 and lower R2".
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from repcost.analysis import path_norm, phi_L
from repcost.analysis.two_rays import f_and_g_for_data, line_angle, prop52_margin
from repcost.config import compose_config, validate
from repcost.data import load_data
from repcost.figures import figure_args, preset_name, run_figure, save_figure
from repcost.plots.ongie import costs_vs_angle_figure

FIG = "ongie22-fig4"


def main():
    a = figure_args(__doc__).parse_args()
    t0 = time.time()
    name = preset_name(FIG, a.full)
    spec = validate(compose_config([f"experiment={name}"]))
    n = 193 if a.full else 49
    angles_pi = np.linspace(0.505, 0.995, n)
    rows = []
    for ap in angles_pi:
        data = load_data(dataclasses.replace(spec.data, angle_pi=float(ap)))
        f, g, units = f_and_g_for_data(data)
        x, y = data.x_train.numpy(), data.y_train.numpy()[:, 0]
        err = max(float(np.max(np.abs(f(x) - y))), float(np.max(np.abs(g(x) - y))))
        margin = prop52_margin(ap * math.pi, units[0][0], units[1][0])
        rows.append({"angle_pi": float(ap), "theta_prop52_pi": line_angle(ap * math.pi) / math.pi,
                     "R2_f": path_norm(f.W, f.a), "R2_g": path_norm(g.W, g.a),
                     "R3_f": phi_L(f.W, f.a, 3), "R3_g": phi_L(g.W, g.a, 3),
                     "a1_l1": float(np.sum(np.abs(units[0][0]))), "a2_l1": float(np.sum(np.abs(units[1][0]))),
                     "prop52_margin": margin, "prop52_holds": margin >= 0, "max_interp_error": err})
    col = lambda k: np.array([r[k] for r in rows])  # noqa: E731
    fig = costs_vs_angle_figure(angles_pi, col("R2_f"), col("R2_g"), col("R3_f"), col("R3_g"), col("prop52_holds"),
                                title=f"Ongie & Willett Fig 4 (data of {name}: slopes {spec.data.slopes}, "
                                      f"offsets {spec.data.offsets})")
    save_figure(fig, FIG, rows, a)
    el = time.time() - t0
    holds = col("prop52_holds")
    r2_ok = bool(np.all(col("R2_f") < col("R2_g")))
    r3_ok = bool(np.all((col("R3_g") < col("R3_f"))[holds]))
    g_wins = col("R3_g") < col("R3_f")
    print(f"\n{FIG}: {n} angles in [{angles_pi[0]:.3f}π, {angles_pi[-1]:.3f}π], {el:.1f} s; "
          f"max interpolation error of f, g: {col('max_interp_error').max():.1e}")
    print(f"  ‖a1‖₁ = {rows[0]['a1_l1']:.3f}, ‖a2‖₁ = {rows[0]['a2_l1']:.3f}")
    print("Claim (Prop 5.2) vs measured:")
    print(f"  R2(f) < R2(g) at every angle: {r2_ok} (min R2(g) − R2(f) = {np.min(col('R2_g') - col('R2_f')):.2e})"
          f" -> {'AGREES' if r2_ok else 'DISAGREES'}")
    print(f"  condition holds at {int(holds.sum())}/{n} angles"
          + (f" (α/π ∈ [{angles_pi[holds].min():.3f}, {angles_pi[holds].max():.3f}])" if holds.any() else ""))
    print(f"  R3(g) < R3(f) wherever it holds: {r3_ok} -> {'AGREES' if r3_ok else 'DISAGREES'}")
    print(f"  R3(g) < R3(f) at {int(g_wins.sum())}/{n} angles overall; f has the lower R3 at "
          + (f"α/π ∈ [{angles_pi[~g_wins].min():.3f}, {angles_pi[~g_wins].max():.3f}]" if (~g_wins).any() else "no angle")
          + " (paper: 'for some values of θ, f ... has lower R3 and lower R2')")


if __name__ == "__main__":
    run_figure(main)
