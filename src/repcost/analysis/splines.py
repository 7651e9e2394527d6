"""Savarese et al. (2019) §3: the function-space cost R̄(f) of univariate 2-layer ReLU networks.

Thm 3.1:  R̄(f) = max(∫|f″|, |f′(−∞) + f′(+∞)|).  For a continuous piecewise-linear f with kinks
x_1 < … < x_M, slope jumps u_i and end slopes l_0, l_M, ∫|f″| = Σ_i |u_i|.  Every function here is
a :class:`PiecewiseLinear1D`; R̄ is computed in one place (:func:`rbar_from_jumps`).

Thm 3.3 / eq. (27): the least R̄ over interpolants of (x_n, y_n) is attained by the linear spline
through the data whose end slopes l_0, l_N minimise max(Σ_{n=0}^{N−1}|l_{n+1} − l_n|, |l_0 + l_N|).
With T = Σ_{n=1}^{N−2}|l_{n+1} − l_n| (interior slopes only) and s = |l_1 + l_{N−1}|, that minimum is

    max(T, (T + s)/2):

taking l_0 = l_1, l_N = l_{N−1} gives max(T, s); moving the end slopes by a total of A raises the
first term to T + A and lowers |l_0 + l_N| to no less than s − A, so when s > T the best is
A = (s − T)/2.  We split A evenly between the two ends (any split is optimal; the theorem does
not pick one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .arrays import as_f64

__all__ = [
    "PiecewiseLinear1D",
    "rbar_from_jumps",
    "rbar_of_piecewise_linear",
    "relu_net_1d_function",
    "relu_net_1d_cost",
    "spline_min_cost",
    "linear_spline_interpolant",
    "min_norm_relu_net_1d",
    "rl_cost_univariate",
]


def rbar_from_jumps(jumps, left_slope: float, right_slope: float) -> float:
    """R̄ = max(Σ|u_i|, |f′(−∞) + f′(+∞)|) from slope jumps u_i and end slopes (Savarese Thm 3.1)."""
    jumps = as_f64(jumps).reshape(-1)
    return float(max(np.sum(np.abs(jumps)), abs(float(left_slope) + float(right_slope))))


@dataclass(frozen=True)
class PiecewiseLinear1D:
    """Continuous piecewise-linear f: R → R given by knots, f(knots) and the M+1 segment slopes."""

    knots: np.ndarray  # (M,), strictly increasing, M ≥ 1
    values: np.ndarray  # (M,), f at the knots
    slopes: np.ndarray  # (M+1,), slopes[0] = f′(−∞), slopes[i] on (knots[i-1], knots[i]), slopes[M] = f′(+∞)

    @classmethod
    def from_values(cls, knots, values, left_slope: float, right_slope: float) -> "PiecewiseLinear1D":
        """Linear interpolation of (knots, values) extended by the given end slopes."""
        knots = as_f64(knots).reshape(-1)
        values = as_f64(values).reshape(-1)
        if knots.size == 0 or knots.shape != values.shape:
            raise ValueError("knots and values must be non-empty and of equal length")
        if np.any(np.diff(knots) <= 0):
            raise ValueError("knots must be strictly increasing")
        inner = np.diff(values) / np.diff(knots)
        slopes = np.concatenate([[float(left_slope)], inner, [float(right_slope)]])
        return cls(knots, values, slopes)

    @property
    def left_slope(self) -> float:
        """f′(−∞)."""
        return float(self.slopes[0])

    @property
    def right_slope(self) -> float:
        """f′(+∞)."""
        return float(self.slopes[-1])

    @property
    def jumps(self) -> np.ndarray:
        """Slope jumps u_i = f′(x_i⁺) − f′(x_i⁻) at the knots (the point masses of f″)."""
        return np.diff(self.slopes)

    def tv_derivative(self) -> float:
        """∫|f″| = Σ_i |u_i|, the total variation of f′ (first term of Savarese Thm 3.1)."""
        return float(np.sum(np.abs(self.jumps)))

    def rbar(self) -> float:
        """R̄(f) = max(∫|f″|, |f′(−∞) + f′(+∞)|) (Savarese Thm 3.1)."""
        return rbar_from_jumps(self.jumps, self.left_slope, self.right_slope)

    def __call__(self, x):
        """Evaluate f at x (numpy in, numpy out; same shape as x)."""
        x = as_f64(x)
        seg = np.searchsorted(self.knots, x, side="right")  # segment index 0..M
        left, right = np.maximum(seg - 1, 0), np.minimum(seg, self.knots.size - 1)
        # from the nearer end of the segment: a far knot (|x| ~ 1e100 for a unit with a tiny input
        # weight) would cancel catastrophically
        base = np.where(np.abs(x - self.knots[right]) < np.abs(x - self.knots[left]), right, left)
        return self.values[base] + self.slopes[seg] * (x - self.knots[base])


def rbar_of_piecewise_linear(knots, values, left_slope: float, right_slope: float) -> float:
    """R̄ of the piecewise-linear interpolant of (knots, values) with given end slopes (Savarese Thm 3.1 / eq. 27)."""
    return PiecewiseLinear1D.from_values(knots, values, left_slope, right_slope).rbar()


# ----------------------------------------------------------------------------------------------
# 2-layer ReLU nets on R
# ----------------------------------------------------------------------------------------------


def _relu_net_eval(w, b, a, c, v, x):
    return np.maximum(np.outer(x, w) + b, 0.0) @ a + v * x + c


def relu_net_1d_function(w, b, a, c: float = 0.0, v: float = 0.0, kink_tol: float = 1e-9) -> PiecewiseLinear1D:
    """f(x) = Σ_k a_k[w_k x + b_k]₊ + v x + c as a PiecewiseLinear1D: kinks −b_k/w_k with jumps a_k|w_k| (Savarese eq. 29).

    Kinks closer than ``kink_tol · max(1, |x|)`` are merged (their signed jumps added) before any
    absolute value is taken; units with w_k = 0 are the constants a_k[b_k]₊.
    """
    w, b, a = (as_f64(t).reshape(-1) for t in (w, b, a))
    if not (w.shape == b.shape == a.shape):
        raise ValueError(f"w, b, a must have equal length, got {w.shape}, {b.shape}, {a.shape}")
    c, v = float(as_f64(c)), float(as_f64(v))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        far = (w != 0) & ~np.isfinite(-b / np.where(w != 0, w, 1.0))
    # a weight so small that its kink −b/w overflows: on every finite x the unit is the constant a[b]₊
    w = np.where(far, 0.0, w)
    live = (w != 0) & (a != 0)
    kinks = -b[live] / w[live]
    jumps = a[live] * np.abs(w[live])
    order = np.argsort(kinks, kind="stable")
    kinks, jumps = kinks[order], jumps[order]
    # f′(−∞): units with w < 0 are active on the left; f′(+∞): units with w > 0.
    left = v + float(np.sum((a * w)[live & (w < 0)]))
    if kinks.size == 0:
        knots = np.zeros(1)
        return PiecewiseLinear1D(knots, _relu_net_eval(w, b, a, c, v, knots), np.array([left, left]))
    # Merge coincident kinks: start a new group where the gap exceeds the tolerance.
    gaps = np.diff(kinks)
    new_group = np.concatenate([[True], gaps > kink_tol * np.maximum(1.0, np.abs(kinks[:-1]))])
    gid = np.cumsum(new_group) - 1
    knots = np.bincount(gid, weights=kinks) / np.bincount(gid)
    merged = np.bincount(gid, weights=jumps)
    slopes = left + np.concatenate([[0.0], np.cumsum(merged)])
    return PiecewiseLinear1D(knots, _relu_net_eval(w, b, a, c, v, knots), slopes)


def relu_net_1d_cost(w, b, a, c: float = 0.0, v: float = 0.0, kink_tol: float = 1e-9) -> float:
    """R̄(f) of f(x) = Σ_k a_k[w_k x + b_k]₊ + v x + c, read off its kinks and end slopes (Savarese Thm 3.1)."""
    return relu_net_1d_function(w, b, a, c, v, kink_tol).rbar()


# ----------------------------------------------------------------------------------------------
# Minimum-cost interpolation (Thm 3.3)
# ----------------------------------------------------------------------------------------------


def _sorted_data(x, y):
    x = as_f64(x).reshape(-1)
    y = as_f64(y).reshape(-1)
    if x.shape != y.shape or x.size == 0:
        raise ValueError("x and y must be non-empty and of equal length")
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    dup = np.concatenate([[False], np.diff(x) == 0])
    if np.any(dup):
        if not np.allclose(y[dup], y[np.flatnonzero(dup) - 1]):
            raise ValueError("repeated x with different y: no interpolant exists")
        x, y = x[~dup], y[~dup]
    return x, y


def _interior_slopes(x, y):
    """l_1, …, l_{N−1} of Savarese eq. (26), T = Σ|l_{n+1} − l_n| over them, and s = |l_1 + l_{N−1}|."""
    l = np.diff(y) / np.diff(x)
    T = float(np.sum(np.abs(np.diff(l))))
    s = abs(float(l[0] + l[-1])) if l.size else 0.0
    return l, T, s


def spline_min_cost(x, y) -> float:
    """min R̄(f) over f with f(x_n) = y_n, = max(T, (T + |l_1 + l_{N−1}|)/2) (Savarese Thm 3.3, eq. 27 minimised)."""
    x, y = _sorted_data(x, y)
    if x.size == 1:
        return 0.0  # the constant function
    _, T, s = _interior_slopes(x, y)
    return max(T, 0.5 * (T + s))


def linear_spline_interpolant(x, y) -> PiecewiseLinear1D:
    """The minimiser of Savarese Thm 3.3: linear spline through the data with end slopes l_0, l_N minimising eq. (27)."""
    x, y = _sorted_data(x, y)
    if x.size == 1:
        return PiecewiseLinear1D(x, y, np.zeros(2))
    l, T, s = _interior_slopes(x, y)
    l0, lN = float(l[0]), float(l[-1])
    if s > T:
        shift = 0.25 * (s - T) * np.sign(l0 + lN)  # total change (s − T)/2, split evenly
        l0, lN = l0 - shift, lN - shift
    return PiecewiseLinear1D(x, y, np.concatenate([[l0], l, [lN]]))


def min_norm_relu_net_1d(f: PiecewiseLinear1D):
    """Balanced 2-layer ReLU net (w, b, a, c) realising f with C(θ) = ½(‖a‖² + ‖w‖²) = R̄(f) (Savarese Thm 3.1 proof, eqs. 18–22).

    α₊ = f″ (jumps u_i); α₋ is chosen as in the proof: α₋ = t|f″| with t = S/Σ|u_i| when
    |S| ≤ Σ|u_i| (S = f′(−∞) + f′(+∞)), else α₋ = sign(S)|f″| plus a point mass S − sign(S)Σ|u_i|
    at the first knot.  Forward units [x − x_i]₊ get α(+1) = (α₊ + α₋)/2, backward units
    [x_i − x]₊ get α(−1) = (α₊ − α₋)/2; each is split as a_k = sign(α)√|α|, w_k = ±√|α|.
    """
    u = f.jumps
    xk = f.knots
    S = f.left_slope + f.right_slope
    U = float(np.sum(np.abs(u)))
    alpha_minus = np.zeros_like(u)
    extra = 0.0
    if abs(S) <= U:
        if U > 0:
            alpha_minus = (S / U) * np.abs(u)
    else:
        alpha_minus = np.sign(S) * np.abs(u)
        extra = S - np.sign(S) * U
    fwd = 0.5 * (u + alpha_minus)
    bwd = 0.5 * (u - alpha_minus)
    fwd[0] += 0.5 * extra
    bwd[0] -= 0.5 * extra
    coef = np.concatenate([fwd, bwd])
    direction = np.concatenate([np.ones_like(fwd), -np.ones_like(bwd)])
    centre = np.concatenate([xk, xk])
    keep = coef != 0
    coef, direction, centre = coef[keep], direction[keep], centre[keep]
    root = np.sqrt(np.abs(coef))
    w = direction * root
    b = -direction * root * centre  # [w x + b]₊ = √|α| [±(x − x_i)]₊
    a = np.sign(coef) * root
    c = float(f(xk[:1])[0] - _relu_net_eval(w, b, a, 0.0, 0.0, xk[:1])[0])
    return w, b, a, c


def rl_cost_univariate(rbar: float, L: int) -> float:
    """R_L(f) = R_2(f)^{2/L} for univariate f (Ongie Thm 3.1, eq. 9); R_2 = R̄ of Savarese Thm 3.1."""
    if int(L) != L or L < 2:
        raise ValueError(f"depth L must be an integer >= 2, got {L}")
    return float(rbar) ** (2.0 / L)
