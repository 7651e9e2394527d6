"""Ongie & Willett Fig 4: R2 and R3 costs of §5.2's f (units along the rays) and g (units along ±w0) vs ray angle.

Analysis only (no training). The samples (points per ray, labels, w1) come from the preset
configs/experiment/ongie22-fig4[-quick].yaml; for each ray separation α in (π/2, π) we build f
and g (both interpolate, checked), and compute R2 = path norm (Ongie eq. 13) and R3 = Φ3
(Lemma 3.4, numerical) with the analysis library. The yellow region is where Prop 5.2's
sufficient condition 1/cos²(θ/2) ≤ 1 + 4‖a1‖₁‖a2‖₁/‖a‖₁²·|sin θ| holds, with θ = π − α the
smallest angle between the lines of w1 and w2.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..analysis import path_norm, phi_L
from ..analysis.two_rays import f_and_g_for_data, line_angle, prop52_margin
from ..data import load_data
from . import Verdict, is_full, preset_data

FIG_ID = "ongie22-fig4"
CLAIM = ("Paper (Prop 5.2, Fig 4 caption): R2(f) < R2(g) always; R3(g) < R3(f) wherever the condition holds; "
         "'for some values of θ, the function f with unaligned units has lower R3 and lower R2'.")


def inputs(args) -> tuple[Any, np.ndarray]:
    """(the preset's data config, the ray angles / π): 49 angles quick, 193 at paper settings."""
    full = is_full(args, FIG_ID)
    return preset_data(FIG_ID, full), np.linspace(0.505, 0.995, 193 if full else 49)


def compute(inp: tuple[Any, np.ndarray]) -> list[dict]:
    """One row per angle: R2 and R3 of f and g, Prop 5.2's margin, the interpolation error of f and g."""
    data_cfg, angles_pi = inp
    rows = []
    for ap in angles_pi:
        data = load_data(dataclasses.replace(data_cfg, angle_pi=float(ap)))
        f, g, units = f_and_g_for_data(data)
        x, y = data.x_train.numpy(), data.y_train.numpy()[:, 0]
        err = max(float(np.max(np.abs(f(x) - y))), float(np.max(np.abs(g(x) - y))))
        margin = prop52_margin(ap * math.pi, units[0][0], units[1][0])
        rows.append({"angle_pi": float(ap), "theta_prop52_pi": line_angle(ap * math.pi) / math.pi,
                     "R2_f": path_norm(f.W, f.a), "R2_g": path_norm(g.W, g.a),
                     "R3_f": phi_L(f.W, f.a, 3), "R3_g": phi_L(g.W, g.a, 3),
                     "a1_l1": float(np.sum(np.abs(units[0][0]))), "a2_l1": float(np.sum(np.abs(units[1][0]))),
                     "prop52_margin": margin, "prop52_holds": margin >= 0, "max_interp_error": err,
                     "_title": f"Ongie & Willett Fig 4 (slopes {data_cfg.slopes}, offsets {data_cfg.offsets})"})
    return rows


def plot(rows: list[dict]):
    """R2 and R3 of f and g against the angle, the region where Prop 5.2's condition holds shaded."""
    a, holds = np.array([r["angle_pi"] for r in rows]), np.array([r["prop52_holds"] for r in rows], dtype=int)
    dx = (a[1] - a[0]) / 2 if a.size > 1 else 0.0
    edges = np.flatnonzero(np.diff(np.concatenate([[0], holds, [0]])))  # starts, then ends, of the runs where it holds
    fig = Figure(figsize=(10, 3.8))
    for i, (key, name) in enumerate((("R2", "$R_2$"), ("R3", "$R_3$"))):
        ax = fig.add_subplot(1, 2, i + 1)
        for k, (lo, hi) in enumerate(zip(edges[::2], edges[1::2] - 1)):
            ax.axvspan(a[lo] - dx, a[hi] + dx, color="gold", alpha=0.3, label=None if k else "Prop 5.2 condition holds")
        ax.plot(a, [r[f"{key}_f"] for r in rows], "C0-", label=f"{name}(f), units along rays")
        ax.plot(a, [r[f"{key}_g"] for r in rows], "C3--", label=f"{name}(g), units along ±$w_0$")
        ax.set_xlabel("angle between rays / π")
        ax.set_ylabel(f"{name} cost")
        ax.legend(fontsize=8)
    fig.suptitle(rows[0]["_title"], fontsize=10)
    return fig


def verdict(rows: list[dict], full: bool) -> Verdict:
    """R2(f) < R2(g) at every angle, and R3(g) < R3(f) wherever Prop 5.2's condition holds."""
    col = lambda k: np.array([r[k] for r in rows])  # noqa: E731
    a, holds = col("angle_pi"), col("prop52_holds").astype(bool)
    r2_ok = bool(np.all(col("R2_f") < col("R2_g")))
    r3_ok = bool(np.all((col("R3_g") < col("R3_f"))[holds]))
    g_wins = col("R3_g") < col("R3_f")
    lines = [f"  {len(rows)} angles in [{a[0]:.3f}π, {a[-1]:.3f}π]; max interpolation error of f, g: "
             f"{col('max_interp_error').max():.1e}",
             f"  R2(f) < R2(g) at every angle: {r2_ok} (min R2(g) − R2(f) = {np.min(col('R2_g') - col('R2_f')):.2e})",
             f"  condition holds at {int(holds.sum())}/{len(rows)} angles; R3(g) < R3(f) wherever it holds: {r3_ok}",
             f"  R3(g) < R3(f) at {int(g_wins.sum())}/{len(rows)} angles overall"]
    return Verdict(r2_ok and r3_ok, "\n".join(lines))
