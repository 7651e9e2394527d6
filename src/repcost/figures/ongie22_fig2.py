"""Ongie & Willett Fig 2: two rays separated by 0.55π and 0.52π; interpolants learned with L = 2 and L = 3.

Paper (Fig 2 caption): (a) at 0.55π "the minimum R2 interpolant f is quite different from the
minimum R3 interpolant g, where the latter has ReLU units aligned with a subspace that is the
difference between the two rays"; (b) at 0.52π "the minimum R2 interpolant f also has a smaller
R3 representation cost than the interpolant with aligned ReLU units". The constructed f and g of
the trained data (labels with an offset) are not the cheapest interpolants, so the f-vs-g
comparison of the caption is checked on the clean §5.2 data of the Fig 4 preset (one unit per ray).
"""

from __future__ import annotations

from . import Verdict, is_full, load_runs, ongie22_fig3, ongie22_fig4, preset_data

FIG_ID = "ongie22-fig2"
CLAIM = ("Paper (Fig 2): at 0.55π R3(g) < R3(f) (the aligned interpolant is the cheaper in R3); at 0.52π "
         "R3(f) < R3(g); R2(f) < R2(g) at both.")


def inputs(args):
    """The sweep's trained runs, and the Fig 4 preset's clean data config for the f-vs-g check."""
    return load_runs(FIG_ID, args), preset_data("ongie22-fig4", is_full(args, FIG_ID))


def compute(inp) -> list[dict]:
    """The trained nets' and constructed f, g rows (as Fig 3), then per angle f and g on the clean Fig 4 data."""
    runs, f4 = inp
    rows = ongie22_fig3.compute(runs)
    clean = ongie22_fig4.compute((f4, sorted(rows[0]["_per_angle"], reverse=True)))
    return rows + [{"kind": "clean f vs g", "angle_pi": c["angle_pi"], **{k: c[k] for k in ("R3_f", "R3_g", "R2_f", "R2_g")}}
                   for c in clean]


def plot(rows: list[dict]):
    return ongie22_fig3.plot(rows, "Ongie & Willett Fig 2: rays at 0.55π (top) and 0.52π (middle) — learned "
                                       "(L = 2, 3) and constructed (f, g) interpolants; red line = span(w0)")


def verdict(rows: list[dict], full: bool) -> Verdict:
    """On the clean data: R3(g) < R3(f) above 0.535π, R3(f) < R3(g) below, and R2(f) < R2(g) everywhere."""
    clean = [r for r in rows if r["kind"] == "clean f vs g"]
    ok = all(((r["R3_g"] < r["R3_f"]) == (r["angle_pi"] > 0.535)) and r["R2_f"] < r["R2_g"] for r in clean)
    lines = ongie22_fig3.table([r for r in rows if r["kind"] != "clean f vs g"])
    lines += [f"  clean data, rays {r['angle_pi']:g}π: R3(f) = {r['R3_f']:.4f}, R3(g) = {r['R3_g']:.4f}; "
              f"R2(f) = {r['R2_f']:.4f}, R2(g) = {r['R2_g']:.4f}" for r in clean]
    return Verdict(ok, "\n".join(lines))
