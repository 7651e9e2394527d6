"""The convex 1-D problem in the primal: the global minimum of a two-layer ReLU net's objective over all widths.

At its balanced points a two-layer ReLU net with free biases on 1-D inputs, trained on MSE + ρΣ‖p‖², is the
problem min_{η,c} (1/N)‖Φη + c − y‖² + 2ρ‖η‖₁ over unit-slope features φ_j(x) = [s_j(x − t_j)]₊ (Bach 2017,
"Breaking the curse of dimensionality with convex neural networks"; Savarese et al. 2019 §3). The dual
constraint is piecewise linear in the kink between data points, so a minimiser exists with its kinks t_j on the
data points: 2N features, s = ±1. Solved by L-BFGS-B on η = u − v (u, v ≥ 0) in units of 2ρ, started from the
min-norm interpolant (Savarese et al. 2019 Thm 3.3, the ρ → 0 limit of the minimiser).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .splines import linear_spline_interpolant, min_norm_relu_net_1d


@dataclass
class ConvexMinimum:
    """η_j·[s_j(x − t_j)]₊ summed, plus c; `value` is the objective (1/N)‖r‖² + 2ρ‖η‖₁ it attains."""

    kinks: np.ndarray
    signs: np.ndarray
    eta: np.ndarray
    c: float
    value: float


def convex_minimum(x: np.ndarray, y: np.ndarray, rho: float, maxiter: int = 20000) -> ConvexMinimum:
    """The convex problem's minimiser on 1-D data (x, y) (N,) at ρ > 0; only the nonzero features are kept."""
    x, y = np.asarray(x, dtype=np.float64).reshape(-1), np.asarray(y, dtype=np.float64).reshape(-1)
    t = np.unique(x)
    n, m = x.size, t.size
    phi = np.maximum(np.concatenate([x[:, None] - t[None, :], t[None, :] - x[:, None]], axis=1), 0.0)
    z0 = np.zeros(4 * m + 1)
    try:  # the interpolant's units sit on these features; a repeated x with two labels has none
        w, b, a, c0 = min_norm_relu_net_1d(linear_spline_interpolant(x, y))
        for wk, bk, ak in zip(w, b, a):
            j = int(np.argmin(np.abs(t - (-bk / wk)))) + (0 if wk > 0 else m)
            eta = ak * abs(wk)
            z0[j if eta > 0 else 2 * m + j] += abs(eta)
        z0[-1] = c0
    except ValueError:
        z0[-1] = float(y.mean())
    scale = 1.0 / (2.0 * rho * n)  # the objective in units of 2ρ: (1/(2ρN))‖r‖² + ‖η‖₁

    def fun(z: np.ndarray) -> tuple[float, np.ndarray]:
        eta, c = z[:2 * m] - z[2 * m:4 * m], z[-1]
        r = phi @ eta + c - y
        g = 2 * scale * (phi.T @ r)
        return scale * (r @ r) + z[:4 * m].sum(), np.concatenate([g + 1, -g + 1, [2 * scale * r.sum()]])

    from scipy.optimize import minimize  # scipy loads only where a run solves the problem

    res = minimize(fun, z0, jac=True, method="L-BFGS-B", bounds=[(0, None)] * (4 * m) + [(None, None)],
                   options={"maxiter": maxiter, "maxfun": 2 * maxiter, "ftol": 1e-15, "gtol": 1e-12})
    eta, c = res.x[:2 * m] - res.x[2 * m:4 * m], float(res.x[-1])
    keep = eta != 0
    signs = np.concatenate([np.ones(m), -np.ones(m)])
    return ConvexMinimum(np.concatenate([t, t])[keep], signs[keep], eta[keep], c, float(res.fun) * 2 * rho)
