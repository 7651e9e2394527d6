"""The exact piecewise-linear function of a univariate deep (leaky-)ReLU net, and its R̄ (Savarese Thm 3.1).

Thm 3.1:  R̄(f) = max(∫|f″|, |f′(−∞) + f′(+∞)|).  For a continuous piecewise-linear f with kinks
x_1 < … < x_M, slope jumps u_i and end slopes l_0, l_M, ∫|f″| = Σ_i |u_i|.  Every function here is
a :class:`PiecewiseLinear1D`, and R̄ is its ``rbar()``.

A net R → R with (leaky-)ReLU activations computes a continuous piecewise-linear function.  We
propagate it layer by layer exactly: every unit of a layer is represented on one shared, sorted
set of knots t_1 < … < t_M by its values at the knots and its two end slopes.  An affine layer
acts on those numbers directly; an activation adds, as new knots, every point where some unit
crosses zero (inside a segment by linear interpolation, or on an end ray).  The output is a
:class:`PiecewiseLinear1D` — for any depth, so deep nets (Savarese Fig 2) can be compared with
:func:`~repcost.analysis.relu_1d.spline_min_cost`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from .arrays import as_f64


@dataclass(frozen=True)
class PiecewiseLinear1D:
    """Continuous piecewise-linear f: R → R given by knots, f(knots) and the M+1 segment slopes."""

    knots: np.ndarray  # (M,), strictly increasing, M ≥ 1
    values: np.ndarray  # (M,), f at the knots
    slopes: np.ndarray  # (M+1,), slopes[0] = f′(−∞), slopes[i] on (knots[i-1], knots[i]), slopes[M] = f′(+∞)

    @property
    def jumps(self) -> np.ndarray:
        """Slope jumps u_i = f′(x_i⁺) − f′(x_i⁻) at the knots (the point masses of f″)."""
        return np.diff(self.slopes)

    def rbar(self) -> float:
        """R̄(f) = max(∫|f″|, |f′(−∞) + f′(+∞)|) (Savarese Thm 3.1), ∫|f″| = Σ_i |u_i| the total variation of f′."""
        return max(float(np.sum(np.abs(self.jumps))), abs(float(self.slopes[0]) + float(self.slopes[-1])))

    def __call__(self, x):
        """Evaluate f at x (numpy in, numpy out; same shape as x)."""
        x = as_f64(x)
        return _eval_on(self.knots, self.values[:, None], self.slopes[:, None], x.reshape(-1))[:, 0].reshape(x.shape)


def relu_net_1d_cost(w, b, a, c: float = 0.0) -> float:
    """R̄(f) of the two-layer net f(x) = Σ_k a_k[w_k x + b_k]₊ + c, from its kinks and end slopes (Savarese Thm 3.1)."""
    w = as_f64(w).reshape(-1)
    return deep_relu_net_1d_function([w[:, None], as_f64(a).reshape(1, -1)], [as_f64(b), [float(c)]],
                                     knot_tol=1e-9).rbar()


def _merge_close(t: np.ndarray, rel_tol: float) -> np.ndarray:
    """Sorted unique knots (at least one), dropping a knot within rel_tol·max(1, |t|) of the previous kept one."""
    t = np.unique(t)
    keep = [0]
    for i in range(1, t.size):
        if t[i] - t[keep[-1]] > rel_tol * max(1.0, abs(t[keep[-1]])):
            keep.append(i)
    return t[keep]


def _eval_on(t_old, Z, S, t_new):
    """Values at t_new of the piecewise-linear functions with knots t_old, values Z (M, n) and segment
    slopes S (M+1, n), each point computed from its nearest knot: a far knot (|x| ~ 1e100 for a unit with a tiny
    input weight) would cancel catastrophically."""
    seg = np.searchsorted(t_old, t_new, side="right")  # segment 0..M of every new point
    left = np.clip(seg - 1, 0, t_old.size - 1)  # knot at the segment's left end (or t_1 for segment 0)
    right = np.clip(seg, 0, t_old.size - 1)  # knot at its right end (or t_M for segment M)
    use_right = np.abs(t_old[right] - t_new) < np.abs(t_new - t_old[left])
    base = np.where(use_right, right, left)
    return Z[base] + S[seg] * (t_new - t_old[base])[:, None]


def deep_relu_net_1d_function(weights: Sequence, biases: Optional[Sequence] = None, slope: float = 0.0,
                              knot_tol: float = 1e-12, far_x: float = 1e50) -> PiecewiseLinear1D:
    """f(x) = W_L σ(… σ(W_1 x + b_1) …) + b_L as an exact PiecewiseLinear1D (σ = leaky ReLU of slope a).

    weights: W_1 (n_1, 1), …, W_L (1, n_{L−1}); biases: b_1 … b_L (already multiplied by any bias
    amount β) or None for a bias-free net.  Knots closer than ``knot_tol·max(1, |t|)`` are merged;
    kinks farther out than ``far_x`` (from units with slopes ~1/far_x) are ignored.
    Segment slopes are propagated exactly (not recomputed from values), so units with tiny input
    weights — whose kinks lie very far out — do not spoil the precision near the data.
    """
    Ws = [as_f64(W) for W in weights]
    if Ws[0].ndim != 2 or Ws[0].shape[1] != 1 or Ws[-1].shape[0] != 1:
        raise ValueError("need a net R → R: W_1 of shape (n, 1) and W_L of shape (1, m)")
    bs = [np.zeros(W.shape[0]) for W in Ws] if biases is None else [as_f64(b).reshape(-1) for b in biases]
    if len(bs) != len(Ws):
        raise ValueError(f"{len(Ws)} weight matrices but {len(bs)} biases")
    # The input x on one knot (t = 0): value 0, slope 1 on both segments.
    t = np.zeros(1)
    H = np.zeros((1, 1))
    S = np.ones((2, 1))  # S[j] = slope on segment j (segment 0 = (−∞, t_1), segment M = (t_M, ∞))
    for layer, (W, b) in enumerate(zip(Ws, bs)):
        Z, SZ = H @ W.T + b, S @ W.T
        if layer == len(Ws) - 1:
            H, S = Z, SZ
            break
        # zero crossings, each computed from the segment end nearer to it
        new = [t]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if t.size > 1:
                z0, z1 = Z[:-1], Z[1:]
                seg, unit = np.nonzero((z0 * z1) < 0)
                sj = SZ[seg + 1, unit]
                from_left = t[seg] - z0[seg, unit] / sj
                from_right = t[seg + 1] - z1[seg, unit] / sj
                near_left = np.abs(z0[seg, unit]) <= np.abs(z1[seg, unit])
                x = np.where(near_left, from_left, from_right)
                new.append(np.clip(x, t[seg], t[seg + 1]))
            xl = t[0] - Z[0] / SZ[0]
            xr = t[-1] - Z[-1] / SZ[-1]
        # a crossing beyond far_x on an end ray comes from a slope |s| ≈ |z(t_end)|/|x|: dropped, it
        # changes that unit's slope by that negligible |s| (and avoids overflow in later layers)
        new.append(xl[np.isfinite(xl) & (xl < t[0]) & (xl > -far_x)])
        new.append(xr[np.isfinite(xr) & (xr > t[-1]) & (xr < far_x)])
        t_new = _merge_close(np.concatenate(new), knot_tol)
        # the slopes on the refined knots t_new ⊇ t: each new segment's, read at its midpoint
        mids = np.concatenate([[t_new[0] - 1.0], 0.5 * (t_new[:-1] + t_new[1:]), [t_new[-1] + 1.0]])
        Z, SZ, t = _eval_on(t, Z, SZ, t_new), SZ[np.searchsorted(t, mids, side="right")], t_new
        # activation: a segment is active where the unit is positive on it (its midpoint / far end)
        # no crossing lies beyond the end knots, so the sign a distance d outside them is the sign on
        # the whole end ray (d ≥ 1 makes a crossing exactly at an end knot resolve to its slope's sign);
        # divided by d so nothing overflows
        zl = Z[0] / max(1.0, abs(t[0])) - SZ[0]
        zr = Z[-1] / max(1.0, abs(t[-1])) + SZ[-1]
        mid = 0.5 * (Z[:-1] + Z[1:])
        active = np.concatenate([(zl > 0)[None], mid > 0, (zr > 0)[None]])
        H = np.where(Z > 0, Z, slope * Z)
        S = np.where(active, SZ, slope * SZ)
    return PiecewiseLinear1D(t, H[:, 0].copy(), S[:, 0].copy())

