"""Ongie & Willett Figs 5 and 7 (§5.3): interpolants built on projections onto 1-D subspaces, and their R3 costs.

Analysis only (no training). Samples: the two rays of configs/experiment/ongie22-fig5[-quick].yaml
(2π/3, w1 ∝ (2, 1)). For a unit vector u at angle φ we project the samples, x ↦ uᵀx, take the
minimum-R2 interpolant of the projected 1-D data (Savarese eq. 27, realised by a balanced ReLU net)
and lift it to R²: every unit lies along ±u, so W is rank one and R3 = Φ3 = R2^{2/3} (Cor 3.6);
R3 is computed with the library's Φ3 (Lemma 3.4) regardless. When two samples with different
labels project to the same point no such interpolant exists (R3 = ∞, a gap in the curve).
Paper (§5.3, Fig 5 caption): "Different choices of the subspace result in effective Ws with the
same nuclear norm but vastly different representation costs R3"; S = span(w0) (the §5.2
subspace) gives a small R3-cost, a poor S "requires ... many more pieces, yielding a much larger
R3-cost". The S = R² column is §5.2's f (units along the rays).
"""

from __future__ import annotations

import math
import time

import numpy as np

from repcost.analysis import path_norm, phi_L
from repcost.analysis.two_rays import f_and_g_for_data, projection_interpolant
from repcost.config import compose_config, validate
from repcost.data import load_data
from repcost.figures import figure_args, preset_name, run_figure, save_figure
from repcost.plots.ongie import grid_values, subspace_panels_figure

FIG = "ongie22-fig5"


def unit(phi_deg: float) -> np.ndarray:
    return np.array([math.cos(math.radians(phi_deg)), math.sin(math.radians(phi_deg))])


def main():
    a = figure_args(__doc__).parse_args()
    t0 = time.time()
    name = preset_name(FIG, a.full)
    data = load_data(validate(compose_config([f"experiment={name}"])).data)
    x, y = data.x_train.numpy(), data.y_train.numpy()[:, 0]
    w0 = np.asarray(data.meta["w0"])
    phi_w0 = math.degrees(math.atan2(w0[1], w0[0])) % 180.0
    phis = np.linspace(0.0, 180.0, 360 if a.full else 72, endpoint=False)
    phis = np.sort(np.concatenate([phis, [phi_w0]]))
    rows, nets = [], {}
    for phi in phis:
        u = unit(phi)
        try:
            h = projection_interpolant(x, y, u)
        except ValueError:  # two samples with different labels project to one point
            rows.append({"phi_deg": float(phi), "R2": math.inf, "R3": math.inf, "R3_cor36": math.inf, "n_units": 0,
                         "nuclear_norm": math.nan, "max_interp_error": math.nan})
            continue
        nets[float(phi)] = h
        R2 = path_norm(h.W, h.a)
        rows.append({"phi_deg": float(phi), "R2": R2, "R3": phi_L(h.W, h.a, 3, n_restarts=0),
                     "R3_cor36": R2 ** (2.0 / 3.0),  # closed form for rank-one W (Cor 3.6), as a check
                     "n_units": int(h.W.shape[0]), "nuclear_norm": float(np.linalg.norm(h.W, "nuc")),
                     "max_interp_error": float(np.max(np.abs(h(x) - y)))})
    f, _, _ = f_and_g_for_data(data)
    R3_f = phi_L(f.W, f.a, 3)
    rows.append({"phi_deg": "R^2 (f)", "R2": path_norm(f.W, f.a), "R3": R3_f, "n_units": int(f.W.shape[0]),
                 "nuclear_norm": float(np.linalg.norm(f.W, "nuc")), "max_interp_error": float(np.max(np.abs(f(x) - y)))})

    finite = [r for r in rows[:-1] if math.isfinite(r["R3"])]
    best = min(finite, key=lambda r: r["R3"])
    worst = max(finite, key=lambda r: r["R3"])
    at_w0 = next(r for r in rows if r["phi_deg"] == float(phi_w0))
    w1 = np.asarray(data.meta["w1"])
    phi_w1 = min(nets, key=lambda p: abs(((p - math.degrees(math.atan2(w1[1], w1[0]))) + 90) % 180 - 90))
    r_w1 = next(r for r in rows if r["phi_deg"] == phi_w1)
    panels = [("S = R² (f, units along rays)", f, None),
              (f"S = span(w0), φ = {phi_w0:.1f}°", nets[float(phi_w0)], (w0, "r")),
              (f"S at φ = {worst['phi_deg']:.1f}° (largest finite R3)", nets[worst["phi_deg"]],
               (unit(worst["phi_deg"]), "m")),
              (f"S near span(w1), φ = {phi_w1:.1f}° (Fig 7)", nets[phi_w1], (unit(phi_w1), "c"))]
    surfaces = [grid_values(h) for _, h, _ in panels]
    titles = []
    for (t, h, _), r in zip(panels, [rows[-1], at_w0, worst, r_w1]):
        titles.append(f"{t}\nR3 = {r['R3']:.3g}, units = {r['n_units']}")
    r3 = np.array([r["R3"] for r in rows[:-1]], dtype=float)
    fig = subspace_panels_figure(surfaces, titles, x, y, phis, np.where(np.isfinite(r3), r3, np.nan),
                                 {f"span(w0), R3 = {at_w0['R3']:.3g}": (phi_w0, at_w0["R3"]),
                                  f"largest finite, R3 = {worst['R3']:.3g}": (worst["phi_deg"], worst["R3"]),
                                  f"near span(w1), R3 = {r_w1['R3']:.3g}": (phi_w1, r_w1["R3"])},
                                 lines=[None] + [p[2] for p in panels[1:]],
                                 suptitle="Ongie & Willett Figs 5/7: interpolants on 1-D subspaces span(u) vs R²")
    save_figure(fig, FIG, rows, a)
    n_inf = sum(1 for r in rows[:-1] if not math.isfinite(r["R3"]))
    print(f"\n{FIG}: {len(phis)} subspaces, {time.time() - t0:.1f} s; max interpolation error "
          f"{max(r['max_interp_error'] for r in finite):.1e}; {n_inf} subspaces admit no interpolant")
    dev = max(abs(r["R3"] - r["R3_cor36"]) / r["R3_cor36"] for r in finite)
    print(f"  numerical Φ3 vs Cor 3.6 closed form R2^(2/3): max relative difference {dev:.1e}")
    print("Claim (§5.3, Fig 5) vs measured:")
    print(f"  S = R² (f): R3 = {R3_f:.4f};  S = span(w0): R3 = {at_w0['R3']:.4f} ({at_w0['n_units']} units);  "
          f"min over u: R3 = {best['R3']:.4f} at φ = {best['phi_deg']:.1f}° (w0 at {phi_w0:.1f}°)")
    print(f"  poor S: largest finite R3 = {worst['R3']:.4g} at φ = {worst['phi_deg']:.1f}° ({worst['n_units']} units), "
          f"{worst['R3'] / at_w0['R3']:.1f}× span(w0)'s -> 'vastly different R3' "
          f"{'AGREES' if worst['R3'] > 2 * at_w0['R3'] else 'DISAGREES'}")
    print(f"  span(w0) is the best 1-D subspace on the grid: {best['phi_deg'] == float(phi_w0) or abs(best['R3'] - at_w0['R3']) < 1e-9}")


if __name__ == "__main__":
    run_figure(main)
