"""Ongie & Willett Figs 5 and 7 (§5.3): interpolants built on projections onto 1-D subspaces, and their R3 costs.

Analysis only (no training). Samples: the two rays of configs/experiment/ongie22-fig5[-quick].yaml
(2π/3, w1 ∝ (2, 1)). For a unit vector u at angle φ we project the samples, x ↦ uᵀx, take the
minimum-R2 interpolant of the projected 1-D data (Savarese eq. 27, realised by a balanced ReLU net)
and lift it to R²: every unit lies along ±u, so W is rank one and R3 = Φ3 = R2^{2/3} (Cor 3.6);
R3 is computed with the library's Φ3 (Lemma 3.4) regardless. When two samples with different
labels project to the same point no such interpolant exists (R3 = ∞, a gap in the curve).
The S = R² row is §5.2's f (units along the rays).
"""

from __future__ import annotations

import math

import numpy as np

from ..analysis import path_norm, phi_L
from ..analysis.two_rays import f_and_g_for_data, projection_interpolant
from ..data import load_data
from ..plots.ongie import grid_values, surfaces_figure
from . import Verdict, is_full, preset_data

FIG_ID = "ongie22-fig5"
CLAIM = ("Paper (§5.3, Fig 5 caption): 'Different choices of the subspace result in effective Ws with the same "
         "nuclear norm but vastly different representation costs R3'; S = span(w0) gives a small R3-cost, a poor S "
         "a much larger one.")


def unit(phi_deg: float) -> np.ndarray:
    return np.array([math.cos(math.radians(phi_deg)), math.sin(math.radians(phi_deg))])


def inputs(args):
    """The preset's two-ray data and the subspace angles (72 quick, 360 at paper settings)."""
    full = is_full(args, FIG_ID)
    return load_data(preset_data(FIG_ID, full)), np.linspace(0.0, 180.0, 360 if full else 72, endpoint=False)


def compute(inp) -> list[dict]:
    """A row per angle φ (plus span(w0)'s own angle), then the S = R² row; the first row carries the plot (`_plot`)."""
    data, phis = inp
    x, y = data.x_train.numpy(), data.y_train.numpy()[:, 0]
    w0, w1 = np.asarray(data.meta["w0"]), np.asarray(data.meta["w1"])
    phi_w0 = math.degrees(math.atan2(w0[1], w0[0])) % 180.0
    phis = np.sort(np.concatenate([phis, [phi_w0]]))
    rows, nets = [], {}
    for phi in phis:
        row = {"phi_deg": float(phi), "R2": math.inf, "R3": math.inf, "R3_cor36": math.inf, "n_units": 0,
               "nuclear_norm": math.nan, "max_interp_error": math.nan, "is_span_w0": float(phi) == phi_w0}
        rows.append(row)
        try:
            h = nets[float(phi)] = projection_interpolant(x, y, unit(phi))
        except ValueError:  # two samples with different labels project to one point: no interpolant (R3 = ∞)
            continue
        R2 = path_norm(h.W, h.a)
        row.update(R2=R2, R3=phi_L(h.W, h.a, 3, n_restarts=0),
                   R3_cor36=R2 ** (2.0 / 3.0),  # closed form for rank-one W (Cor 3.6), as a check
                   n_units=int(h.W.shape[0]), nuclear_norm=float(np.linalg.norm(h.W, "nuc")),
                   max_interp_error=float(np.max(np.abs(h(x) - y))))
    f, _, _ = f_and_g_for_data(data)
    rows.append({"phi_deg": "R^2 (f)", "R2": path_norm(f.W, f.a), "R3": phi_L(f.W, f.a, 3), "n_units": int(f.W.shape[0]),
                 "nuclear_norm": float(np.linalg.norm(f.W, "nuc")), "max_interp_error": float(np.max(np.abs(f(x) - y))),
                 "is_span_w0": False})
    finite = [r for r in rows[:-1] if math.isfinite(r["R3"])]
    worst = max(finite, key=lambda r: r["R3"])
    at_w0 = next(r for r in rows if r["is_span_w0"])
    phi_w1 = min(nets, key=lambda p: abs(((p - math.degrees(math.atan2(w1[1], w1[0]))) + 90) % 180 - 90))
    r_w1 = next(r for r in rows if r["phi_deg"] == phi_w1)
    panels = [("S = R² (f, units along rays)", f, None, rows[-1]),
              (f"S = span(w0), φ = {phi_w0:.1f}°", nets[float(phi_w0)], (w0, "r"), at_w0),
              (f"S at φ = {worst['phi_deg']:.1f}° (largest finite R3)", nets[worst["phi_deg"]],
               (unit(worst["phi_deg"]), "m"), worst),
              (f"S near span(w1), φ = {phi_w1:.1f}° (Fig 7)", nets[phi_w1], (unit(phi_w1), "c"), r_w1)]
    rows[0]["_plot"] = {
        "panels": [dict(surface=grid_values(h), title=f"{t}\nR3 = {r['R3']:.3g}, units = {r['n_units']}", x=x, y=y,
                        span=span) for t, h, span, r in panels],
        "phis": phis,
        "marks": {f"span(w0), R3 = {at_w0['R3']:.3g}": (phi_w0, at_w0["R3"]),
                  f"largest finite, R3 = {worst['R3']:.3g}": (worst["phi_deg"], worst["R3"]),
                  f"near span(w1), R3 = {r_w1['R3']:.3g}": (phi_w1, r_w1["R3"])}}
    return rows


def plot(rows: list[dict]):
    """The interpolants on R², span(w0) and two poor subspaces, then R3 against the angle of u."""
    p = rows[0]["_plot"]
    r3 = np.array([r["R3"] for r in rows[:-1]], dtype=float)

    def r3_curve(ax):
        ax.semilogy(p["phis"], np.where(np.isfinite(r3), r3, np.nan), "k.-", lw=0.8, ms=3,
                    label="$R_3$ of the min-$R_2$ interpolant on span(u)")
        for k, (label, (phi, val)) in enumerate(p["marks"].items()):
            ax.semilogy([phi], [val], "o", ms=8, color=f"C{k}", label=label)
        ax.set_xlabel("angle of u (degrees)")
        ax.set_ylabel("$R_3$ cost")
        ax.legend(fontsize=8)

    return surfaces_figure(p["panels"], len(p["panels"]),
                           "Ongie & Willett Figs 5/7: interpolants on 1-D subspaces span(u) vs R²", [r3_curve])


def verdict(rows: list[dict], full: bool) -> Verdict:
    """Reproduced when the costliest finite subspace needs more than twice span(w0)'s R3."""
    finite = [r for r in rows[:-1] if math.isfinite(r["R3"])]
    at_w0 = next(r for r in rows if r["is_span_w0"])
    best, worst = min(finite, key=lambda r: r["R3"]), max(finite, key=lambda r: r["R3"])
    dev = max(abs(r["R3"] - r["R3_cor36"]) / r["R3_cor36"] for r in finite)
    ok = worst["R3"] > 2 * at_w0["R3"]
    lines = [f"  {len(rows) - 1} subspaces; {len(rows) - 1 - len(finite)} admit no interpolant; numerical Φ3 vs "
             f"Cor 3.6's R2^(2/3): max relative difference {dev:.1e}",
             f"  S = R² (f): R3 = {rows[-1]['R3']:.4f}; S = span(w0): R3 = {at_w0['R3']:.4f} ({at_w0['n_units']} units); "
             f"min over u: R3 = {best['R3']:.4f} at φ = {best['phi_deg']:.1f}°",
             f"  poor S: largest finite R3 = {worst['R3']:.4g} at φ = {worst['phi_deg']:.1f}°, "
             f"{worst['R3'] / at_w0['R3']:.1f}× span(w0)'s"]
    return Verdict(ok, "\n".join(lines))
