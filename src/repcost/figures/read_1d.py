"""What the 1-D figures (Savarese et al. 2019 Figs 1, 2) read off one trained net R → R."""

from __future__ import annotations

import numpy as np
import torch

from ..analysis.function_1d import model_1d_function
from ..analysis.relu_1d import duality_gap, spline_min_cost
from . import eval_1d

KINK_REL = 1e-3  # a kink counts when its slope change is above KINK_REL × the largest one


def read_1d(run) -> dict:
    """R̄(f) exact from the kinks (Thm 3.1), the spline minimum (Thm 3.3), the fit's residual and kinks, and the
    plot's arrays (`_x`, `_y`, `_grid`, `_f`, `_knots`). `duality_gap_rel` (two-layer nets): how far the run's
    objective is at most above its global minimum (analysis/relu_1d.py; NaN for deeper nets)."""
    model, data, summary = run.model, run.data, run.summary
    t = run.spec.train
    gap = duality_gap(model, data.x_train, data.y_train, t.loss, t.lam, t.reg_scale).get("duality_gap_rel", float("nan"))
    x, y = data.x_train.numpy()[:, 0], data.y_train.numpy()[:, 0]
    smin = spline_min_cost(x, y)
    f = model_1d_function(model)
    rbar = f.rbar()
    with torch.no_grad():
        pred = model(data.x_train)[:, 0].numpy()
    u = np.abs(f.jumps)
    big = u > KINK_REL * u.max() if u.size else np.zeros(0, bool)
    span = x.max() - x.min()
    grid = np.linspace(x.min() - 0.25 * span, x.max() + 0.25 * span, 2001)
    return {"rbar": rbar, "spline_min_cost": smin, "rbar_over_min": rbar / smin,
            "train_loss": summary["train_loss"], "objective": summary["objective"],
            "max_abs_residual": float(np.max(np.abs(pred - y))), "n_kinks": int(big.sum()),
            "steps": summary["steps"], "wall_time_s": summary["wall_time_s"], "lam": run.spec.train.lam,
            "critical_point": summary.get("critical_point"), "duality_gap_rel": gap, "path": run.path,
            "_x": x, "_y": y, "_grid": grid, "_f": eval_1d(model, grid), "_knots": f.knots[big]}
