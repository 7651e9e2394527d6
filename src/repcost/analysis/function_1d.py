"""The exact piecewise-linear function of a univariate deep (leaky-)ReLU net, and its R̄ (Savarese Thm 3.1).

A net R → R with (leaky-)ReLU activations computes a continuous piecewise-linear function.  We
propagate it layer by layer exactly: every unit of a layer is represented on one shared, sorted
set of knots t_1 < … < t_M by its values at the knots and its two end slopes.  An affine layer
acts on those numbers directly; an activation adds, as new knots, every point where some unit
crosses zero (inside a segment by linear interpolation, or on an end ray).  The output is a
:class:`~repcost.analysis.splines.PiecewiseLinear1D`, whose ``rbar()`` is Savarese's
R̄(f) = max(∫|f″|, |f′(−∞) + f′(+∞)|) — for any depth, so deep nets (Savarese Fig 2) can be
compared with :func:`~repcost.analysis.splines.spline_min_cost`.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .arrays import as_f64
from .splines import PiecewiseLinear1D

__all__ = ["deep_relu_net_1d_function", "model_1d_function", "model_rbar_1d", "rbar_on_grid"]


def _merge_close(t: np.ndarray, rel_tol: float) -> np.ndarray:
    """Sorted unique knots, dropping a knot within rel_tol·max(1, |t|) of the previous kept one."""
    t = np.unique(t)
    if t.size <= 1:
        return t
    keep = [0]
    for i in range(1, t.size):
        if t[i] - t[keep[-1]] > rel_tol * max(1.0, abs(t[keep[-1]])):
            keep.append(i)
    return t[keep]


def _eval_on(t_old, Z, sl, sr, t_new):
    """Values at t_new of the piecewise-linear functions given by (t_old, Z (M, n), end slopes sl, sr)."""
    out = np.empty((t_new.size, Z.shape[1]))
    for j in range(Z.shape[1]):
        out[:, j] = np.interp(t_new, t_old, Z[:, j])
    left, right = t_new < t_old[0], t_new > t_old[-1]
    out[left] = Z[0] + np.outer(t_new[left] - t_old[0], sl)
    out[right] = Z[-1] + np.outer(t_new[right] - t_old[-1], sr)
    return out


def deep_relu_net_1d_function(weights: Sequence, biases: Optional[Sequence] = None, slope: float = 0.0,
                              knot_tol: float = 1e-12) -> PiecewiseLinear1D:
    """f(x) = W_L σ(… σ(W_1 x + b_1) …) + b_L as an exact PiecewiseLinear1D (σ = leaky ReLU of slope a).

    weights: W_1 (n_1, 1), …, W_L (1, n_{L−1}); biases: b_1 … b_L (already multiplied by any bias
    amount β) or None for a bias-free net.  Knots closer than ``knot_tol·max(1, |t|)`` are merged.
    """
    Ws = [as_f64(W) for W in weights]
    if Ws[0].ndim != 2 or Ws[0].shape[1] != 1 or Ws[-1].shape[0] != 1:
        raise ValueError("need a net R → R: W_1 of shape (n, 1) and W_L of shape (1, m)")
    bs = [np.zeros(W.shape[0]) for W in Ws] if biases is None else [as_f64(b).reshape(-1) for b in biases]
    if len(bs) != len(Ws):
        raise ValueError(f"{len(Ws)} weight matrices but {len(bs)} biases")
    # The input x on one knot (t = 0): value 0, slope 1 on both ends.
    t = np.zeros(1)
    H = np.zeros((1, 1))
    sl = np.ones(1)
    sr = np.ones(1)
    for layer, (W, b) in enumerate(zip(Ws, bs)):
        Z, zl, zr = H @ W.T + b, sl @ W.T, sr @ W.T
        if layer == len(Ws) - 1:
            H, sl, sr = Z, zl, zr
            break
        # zero crossings: inside segments, and on the two end rays
        new = [t]
        if t.size > 1:
            z0, z1 = Z[:-1], Z[1:]
            cross = (z0 * z1) < 0
            seg, unit = np.nonzero(cross)
            frac = z0[seg, unit] / (z0[seg, unit] - z1[seg, unit])
            new.append(t[seg] + frac * (t[seg + 1] - t[seg]))
        with np.errstate(divide="ignore", invalid="ignore"):
            xl = t[0] - Z[0] / zl
            xr = t[-1] - Z[-1] / zr
        new.append(xl[np.isfinite(xl) & (xl < t[0])])
        new.append(xr[np.isfinite(xr) & (xr > t[-1])])
        t_new = _merge_close(np.concatenate(new), knot_tol)
        Z = _eval_on(t, Z, zl, zr, t_new)
        t = t_new
        act_l = (Z[0] > 0) | ((Z[0] == 0) & (zl < 0))  # active as x → −∞
        act_r = (Z[-1] > 0) | ((Z[-1] == 0) & (zr > 0))  # active as x → +∞
        H = np.where(Z > 0, Z, slope * Z)
        sl = np.where(act_l, zl, slope * zl)
        sr = np.where(act_r, zr, slope * zr)
    return PiecewiseLinear1D.from_values(t, H[:, 0], float(sl[0]), float(sr[0]))


def model_1d_function(model) -> PiecewiseLinear1D:
    """The PiecewiseLinear1D of a repcost model R → R (families fc and linear_relu)."""
    if model.family == "fc":
        Ws = [as_f64(W) for W in model.weight_matrices()]
        bs = [model.beta * as_f64(b) for b in model.bias_vectors()] if model.beta > 0 else None
        return deep_relu_net_1d_function(Ws, bs, slope=model.slope)
    if model.family == "linear_relu":
        W = as_f64(model.effective_matrix())
        a = as_f64(model.a)
        c = as_f64(model.c) if model.c is not None else np.zeros(a.shape[0])
        return deep_relu_net_1d_function([W, a], [as_f64(model.b), c])
    raise ValueError(f"model_1d_function supports fc and linear_relu models, not {model.family}")


def model_rbar_1d(model) -> float:
    """Savarese's R̄(f) (Thm 3.1) of the function a univariate fc / linear_relu model computes."""
    return model_1d_function(model).rbar()


def rbar_on_grid(x, f) -> float:
    """R̄ estimated from samples f(x) on a sorted grid: Σ|Δ slope| and the two outer slopes (a check, not exact)."""
    x, f = as_f64(x).reshape(-1), as_f64(f).reshape(-1)
    s = np.diff(f) / np.diff(x)
    return float(max(np.sum(np.abs(np.diff(s))), abs(s[0] + s[-1])))
