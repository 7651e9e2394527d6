"""Ongie & Willett Fig 2: two rays separated by 0.55π and 0.52π; interpolants learned with L = 2 and L = 3.

Paper (Fig 2 caption): (a) at 0.55π "the minimum R2 interpolant f is quite different from the
minimum R3 interpolant g, where the latter has ReLU units aligned with a subspace that is the
difference between the two rays"; (b) at 0.52π "the minimum R2 interpolant f also has a smaller
R3 representation cost than the interpolant with aligned ReLU units". We measure, per angle, R3
of §5.2's constructed f and g (analysis library, Φ3 of Lemma 3.4), and the trained L = 2 / L = 3
nets' alignment (s2/s1 of W, angle of its top right singular vector to w0) and costs.
Drawing and per-run analysis are shared with experiments/ongie22-fig3.py.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

from repcost.figures import figure_args, run_sweep, save_figure

FIG = "ongie22-fig2"


def _fig3():
    spec = importlib.util.spec_from_file_location("ongie22_fig3", Path(__file__).with_name("ongie22-fig3.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    a = figure_args(__doc__).parse_args()
    f3 = _fig3()
    t0 = time.time()
    runs = run_sweep(FIG, full=a.full, launcher=a.launcher)
    rows, per_angle = f3.analyse_runs(runs)
    fig = f3.draw(per_angle, "Ongie & Willett Fig 2: rays at 0.55π (top) and 0.52π (middle) — learned (L = 2, 3) "
                             "and constructed (f, g) interpolants; red line = span(w0)")
    save_figure(fig, FIG, [{k: v for k, v in r.items() if k != "path"} for r in rows], a.out)
    f3.report(rows, per_angle, time.time() - t0)
    print("\nClaim (Fig 2) vs measured:")
    for key in sorted(per_angle, reverse=True):
        cf = next(r for r in rows if r["angle_pi"] == key and r["kind"].startswith("f"))
        cg = next(r for r in rows if r["angle_pi"] == key and r["kind"].startswith("g"))
        want = "R3(g) < R3(f)" if key > 0.535 else "R3(f) < R3(g)"
        got = "R3(g) < R3(f)" if cg["R3"] < cf["R3"] else "R3(f) < R3(g)"
        print(f"  rays {key:g}π: paper {want}; measured R3(f) = {cf['R3']:.4f}, R3(g) = {cg['R3']:.4f} -> {got} "
              f"({'AGREES' if want == got else 'DISAGREES'}); R2(f) = {cf['R2']:.4f} < R2(g) = {cg['R2']:.4f}: "
              f"{cf['R2'] < cg['R2']}")
        for r in rows:
            if r["kind"] == "trained" and r["angle_pi"] == key:
                closer = "g" if abs(r["R3"] - cg["R3"]) < abs(r["R3"] - cf["R3"]) else "f"
                print(f"    trained L = {r['L']} seed {r['seed']}: train loss {r['train_loss']:.1e}, R2 = {r['R2']:.4f}, "
                      f"R3 = {r['R3']:.4f}, s2/s1 = {r['s2_over_s1']:.2e}, v1 {r['v1_angle_to_w0_deg']:.1f}° from w0, "
                      f"units {r['unit_angle_to_rays_deg']:.1f}° from rays (R3 closer to {closer})")


if __name__ == "__main__":
    main()
