"""Savarese et al. 2019, Fig 1: the linear-spline interpolant beside 2-layer ReLU nets of width 20 and 100.

The sweep (preset savarese19-fig1[-quick]) trains with λ = 1e-5 on C(θ) = ½(‖w⁽²⁾‖² + ‖W⁽¹⁾‖²),
biases free; for each net the figure reports C(θ), R̄(f) of the learned function (exact, from its
kinks, Thm 3.1) and the minimum cost over interpolants `spline_min_cost` (Thm 3.3). `read_1d` serves
savarese19_fig2 (the same points fitted by deeper nets) as well.
"""

from __future__ import annotations

import numpy as np
import torch

from ..analysis.arrays import float64_model
from ..analysis.relu_1d import deep_relu_net_1d_function, duality_gap, linear_spline_interpolant, spline_min_cost
from ..plots.learned_function import function_panels
from . import Verdict, quick_verdict

FIG_ID = "savarese19-fig1"
TARGET_REL = 0.03  # C(θ) and R̄(f) within 3 % of spline_min_cost
CLAIM = ("Paper (Fig 1 caption): both nets (width 20, 100), trained with λ = 1e-5, reach the optimal R̄(f) = min cost "
         "of interpolation (4.35 on their points) and the optimal C(θ) = R̄.")
KINK_REL = 1e-3  # a kink counts when its slope change is above KINK_REL × the largest one


def read_1d(run) -> dict:
    """R̄(f) exact from the kinks (Thm 3.1), the spline minimum (Thm 3.3), the fit's residual and kinks, and the
    plot's arrays (`_x`, `_y`, `_grid`, `_f`, `_knots`). `duality_gap_rel` (two-layer nets): how far the run's
    objective is at most above its global minimum (analysis/relu_1d.py; NaN for deeper nets)."""
    model, data, t = run.model, run.data, run.spec.train
    gap = duality_gap(model, data.x_train, data.y_train, t.loss, t.lam, t.reg_scale).get("duality_gap_rel", float("nan"))
    x, y = data.x_train.numpy()[:, 0], data.y_train.numpy()[:, 0]
    smin = spline_min_cost(x, y)
    chain = float64_model(model).affine_chain()  # the exact piecewise-linear form, for any depth
    f = deep_relu_net_1d_function(chain.weights, chain.biases, chain.slope)
    rbar = f.rbar()
    span = x.max() - x.min()
    grid = np.linspace(x.min() - 0.25 * span, x.max() + 0.25 * span, 2001)
    with torch.no_grad():  # the plot draws the net's own forward pass, the exact form `f` gives R̄
        pred = model(data.x_train)[:, 0].numpy()
        f_grid = model(torch.as_tensor(grid, dtype=torch.float64)[:, None])[:, 0].numpy()
    u = np.abs(f.jumps)
    big = u > KINK_REL * u.max() if u.size else np.zeros(0, bool)
    return {"rbar": rbar, "spline_min_cost": smin, "rbar_over_min": rbar / smin,
            "max_abs_residual": float(np.max(np.abs(pred - y))), "n_kinks": int(big.sum()), **run.columns("objective"),
            "lam": t.lam, "duality_gap_rel": gap, "path": run.path, "_x": x, "_y": y, "_grid": grid, "_f": f_grid, "_knots": f.knots[big]}


def compute(runs) -> list[dict]:
    """The spline's row, then one row per width; `_x`, `_y`, `_grid`, `_f`, `_knots` for the plot."""
    rows = []
    for run in sorted(runs, key=lambda r: r.spec.model.width):
        fit, C = read_1d(run), 0.5 * run.summary["param_sq_norm"]  # Savarese's C(θ) = ½(‖a‖² + ‖W_1‖²), biases free
        rows.append({"panel": f"width {run.spec.model.width}", "width": run.spec.model.width, "C_theta": C,
                     "C_over_min": C / fit["spline_min_cost"], "init_scale": run.spec.model.init_scale, **fit})
    x, y = rows[0]["_x"], rows[0]["_y"]
    spline, smin = linear_spline_interpolant(x, y), spline_min_cost(x, y)
    rows.insert(0, {"panel": "linear spline", "width": "", "C_theta": "", "rbar": spline.rbar(), "spline_min_cost": smin,
                    "rbar_over_min": spline.rbar() / smin, "_f": spline(rows[0]["_grid"]), "_knots": spline.knots})
    return rows


def plot(rows: list[dict]):
    """The spline and each net's function, knots marked."""
    titles = [f"linear spline: R̄ = spline_min_cost = {rows[0]['spline_min_cost']:.3f}"]
    titles += [f"width {r['width']}: C(θ) = {r['C_theta']:.3f}, R̄(f) = {r['rbar']:.3f}" for r in rows[1:]]
    return function_panels(rows[1]["_x"], rows[1]["_y"], rows[1]["_grid"], [r["_f"] for r in rows], titles,
                           knots=[r["_knots"] for r in rows])


def verdict(rows: list[dict], full: bool) -> Verdict:
    """Every width's C(θ) and R̄(f) within TARGET_REL of spline_min_cost."""
    nets = rows[1:]
    lines = [f"  width {r['width']:>3}: C(θ) = {r['C_theta']:.4f} ({r['C_over_min'] - 1:+.2%}), R̄(f) = {r['rbar']:.4f} "
             f"({r['rbar_over_min'] - 1:+.2%}), train MSE = {r['train_loss']:.2e}, max |residual| = "
             f"{r['max_abs_residual']:.2e}, kinks = {r['n_kinks']}, critical point: {r['critical_point']}, objective at most "
             f"{r['duality_gap_rel']:.1e} (relative) above the global minimum (duality gap)" for r in nets]
    ok = all(abs(r["C_over_min"] - 1) <= TARGET_REL and abs(r["rbar_over_min"] - 1) <= TARGET_REL for r in nets)
    lines.append(f"  every width within {TARGET_REL:.0%} of spline_min_cost = {rows[0]['spline_min_cost']:.4f}: "
                 f"{'yes' if ok else 'NO'}")
    return quick_verdict(ok, lines, full, FIG_ID)
