"""Ongie & Willett Fig 3 (+ Fig 6): two rays separated by 2π/3, w1 ∝ (2, 1); interpolants learned with L = 2 and L = 3.

Paper (Fig 3 caption, §5.2): the minimum-R2 interpolant has ReLU units along the rays; the
minimum-R3 interpolant (one linear layer) has units aligned with w0 = (w1 − w2)/‖w1 − w2‖, so it
does not vary perpendicular to w0; both interpolate the samples (Fig 6). Targets checked here:
the L = 3 net's effective inner matrix W = W2W1 has s2/s1 < 0.05 and its top right singular vector
within 10° of w0; the L = 2 net's units, weighted by |a_k|‖w_k‖, lie within 10° of the rays.
"""

from __future__ import annotations

from . import Verdict, quick_verdict
from .two_rays_panels import analyse_runs, draw

FIG_ID = "ongie22-fig3"
TARGET = {"s2_over_s1": 0.05, "v1_deg": 10.0, "units_deg": 10.0}
CLAIM = ("Paper (Fig 3, §5.2): the L = 2 net's units lie along the rays; the L = 3 net's effective W is rank one "
         "along w0 (targets: s2/s1 < 0.05, top right singular vector within 10° of w0, L = 2 units within 10° of "
         "the rays).")
TITLE = ("Ongie & Willett Fig 3/6: two rays at 2π/3 — learned (L = 2, 3) and constructed (f, g) interpolants; "
         "red line = span(w0)")


def compute(runs) -> list[dict]:
    """A row per trained net and per constructed f, g; the first row carries the plot's nets (`_per_angle`)."""
    return analyse_runs(runs)


def plot(rows: list[dict]):
    return draw(rows, TITLE)


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
    ok = True
    for r in rows:
        if r["kind"] != "trained":
            continue
        if r["L"] == 3:
            ok &= r["s2_over_s1"] < TARGET["s2_over_s1"] and r["v1_angle_to_w0_deg"] < TARGET["v1_deg"]
        elif r["L"] == 2:
            ok &= r["unit_angle_to_rays_deg"] < TARGET["units_deg"]
    return quick_verdict(ok, table(rows), full, FIG_ID)
