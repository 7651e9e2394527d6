"""Savarese et al. 2019, Fig 1: the linear-spline interpolant beside 2-layer ReLU nets of width 20 and 100.

The sweep (preset savarese19-fig1[-quick]) trains with λ = 1e-5 on C(θ) = ½(‖w⁽²⁾‖² + ‖W⁽¹⁾‖²),
biases free; for each net the figure reports C(θ), R̄(f) of the learned function (exact, from its
kinks, Thm 3.1) and the minimum cost over interpolants `spline_min_cost` (Thm 3.3).
"""

from __future__ import annotations

import numpy as np
import torch

from ..analysis.function_1d import model_1d_function
from ..analysis.splines import linear_spline_interpolant, spline_min_cost
from ..plots.savarese import interpolant_panels
from . import Verdict, eval_1d

FIG_ID = "savarese19-fig1"
SORT_BY = "model.width"
TARGET_REL = 0.03  # C(θ) and R̄(f) within 3 % of spline_min_cost
CLAIM = ("Paper (Fig 1 caption): both nets (width 20, 100), trained with λ = 1e-5, reach the optimal R̄(f) = min cost "
         "of interpolation (4.35 on their points) and the optimal C(θ) = R̄.")


def compute(runs) -> list[dict]:
    """The spline's row, then one row per width; `_x`, `_y`, `_grid`, `_f`, `_knots` for the plot."""
    rows = []
    for run in runs:
        model, data, summary, spec = run.model, run.data, run.summary, run.spec
        x, y = data.x_train.numpy()[:, 0], data.y_train.numpy()[:, 0]
        smin = spline_min_cost(x, y)
        f = model_1d_function(model)
        rbar = f.rbar()
        C = 0.5 * summary["param_sq_norm"]  # Savarese's C(θ) = ½(‖a‖² + ‖W_1‖²), biases free
        with torch.no_grad():
            pred = model(data.x_train)[:, 0].numpy()
        u = np.abs(f.jumps)
        big = u > 1e-3 * u.max() if u.size else np.zeros(0, bool)
        span = x.max() - x.min()
        grid = np.linspace(x.min() - 0.25 * span, x.max() + 0.25 * span, 2001)
        rows.append({"panel": f"width {spec.model.width}", "width": spec.model.width, "C_theta": C, "rbar": rbar,
                     "spline_min_cost": smin, "C_over_min": C / smin, "rbar_over_min": rbar / smin,
                     "train_loss": summary["train_loss"], "objective": summary["objective"],
                     "max_abs_residual": float(np.max(np.abs(pred - y))), "n_kinks": int(big.sum()),
                     "steps": summary["steps"], "wall_time_s": summary["wall_time_s"], "lam": spec.train.lam,
                     "init_scale": spec.model.init_scale, "path": run.path, "critical_point": summary.get("critical_point"),
                     "_x": x, "_y": y, "_grid": grid, "_f": eval_1d(model, grid), "_knots": f.knots[big]})
    x, y = rows[0]["_x"], rows[0]["_y"]
    spline, smin = linear_spline_interpolant(x, y), spline_min_cost(x, y)
    rows.insert(0, {"panel": "linear spline", "width": "", "C_theta": "", "rbar": spline.rbar(), "spline_min_cost": smin,
                    "rbar_over_min": spline.rbar() / smin, "_f": spline(rows[0]["_grid"]), "_knots": spline.knots})
    return rows


def plot(rows: list[dict]):
    """The spline and each net's function, knots marked."""
    nets = rows[1:]
    x, y, grid = nets[0]["_x"], nets[0]["_y"], nets[0]["_grid"]
    titles = [f"linear spline: R̄ = spline_min_cost = {rows[0]['spline_min_cost']:.3f}"]
    titles += [f"width {r['width']}: C(θ) = {r['C_theta']:.3f}, R̄(f) = {r['rbar']:.3f}" for r in nets]
    return interpolant_panels(x, y, grid, [r["_f"] for r in rows], titles, knots=[r["_knots"] for r in rows])


def verdict(rows: list[dict], full: bool) -> Verdict:
    """Every width's C(θ) and R̄(f) within TARGET_REL of spline_min_cost."""
    nets = rows[1:]
    lines = [f"  width {r['width']:>3}: C(θ) = {r['C_theta']:.4f} ({r['C_over_min'] - 1:+.2%}), R̄(f) = {r['rbar']:.4f} "
             f"({r['rbar_over_min'] - 1:+.2%}), train MSE = {r['train_loss']:.2e}, max |residual| = "
             f"{r['max_abs_residual']:.2e}, kinks = {r['n_kinks']}, critical point: {r['critical_point']}" for r in nets]
    ok = all(abs(r["C_over_min"] - 1) <= TARGET_REL and abs(r["rbar_over_min"] - 1) <= TARGET_REL for r in nets)
    lines.append(f"  every width within {TARGET_REL:.0%} of spline_min_cost = {rows[0]['spline_min_cost']:.4f}: "
                 f"{'yes' if ok else 'NO'}")
    if not ok and not full:
        return Verdict(None, "\n".join(lines + ["  (quick size; make fig-savarese19-fig1 FULL=1 for the paper's)"]))
    return Verdict(ok, "\n".join(lines))
