"""ReLU nets on 1-D inputs: the exact function of a net of any depth and its R̄, the units of a two-layer net, the
spline minimum, the convex problem with its dual, the duality gap, and the placement of the convex minimiser.

Functions (Savarese et al. 2019 Thm 3.1).  R̄(f) = max(∫|f″|, |f′(−∞) + f′(+∞)|); for a continuous
piecewise-linear f with kinks x_1 < … < x_M, slope jumps u_i and end slopes l_0, l_M, ∫|f″| = Σ_i |u_i|.  Every
function here is a :class:`PiecewiseLinear1D`, and R̄ is its ``rbar()``.  A net R → R with (leaky-)ReLU
activations is propagated layer by layer exactly (`deep_relu_net_1d_function`): every unit of a layer is
represented on one shared, sorted set of knots t_1 < … < t_M by its values at the knots and its two end slopes.
An affine layer acts on those numbers directly; an activation adds, as new knots, every point where some unit
crosses zero (inside a segment by linear interpolation, or on an end ray).  So deep nets (Savarese Fig 2) can be
compared with `spline_min_cost`.

Units.  A net Σ_k a_k[w_k x + b_k]₊ + c with free biases is, unit by unit, η_k[s_k(x − t_k)]₊ + c with kink
t_k = −b_k/w_k, side s_k = sign w_k and η_k = a_k|w_k|; a balanced unit (|w_k| = ‖a_k‖) costs
½(w_k² + ‖a_k‖²) = ‖η_k‖. Every two-layer net this module makes is a balanced :class:`TwoLayerNet`
(`balanced_net`).

Spline minimum (Savarese et al. 2019 Thm 3.3, eq. 27).  The least R̄ over interpolants of (x_n, y_n) is
attained by the linear spline through the data whose end slopes l_0, l_N minimise
max(Σ_{n=0}^{N−1}|l_{n+1} − l_n|, |l_0 + l_N|). With T = Σ_{n=1}^{N−2}|l_{n+1} − l_n| (interior slopes only)
and s = |l_1 + l_{N−1}| that minimum is max(T, (T + s)/2): taking l_0 = l_1, l_N = l_{N−1} gives max(T, s);
moving the end slopes by a total of A raises the first term to T + A and lowers |l_0 + l_N| to no less than
s − A, so when s > T the best is A = (s − T)/2, split here evenly between the two ends (any split is optimal).

Convex problem.  At its balanced points a net trained on MSE + ρΣ‖p‖² (weights and output weights; biases
free) is the problem  min_{η,c} (1/N)‖Φη + c − y‖² + 2ρΣ_j‖η_j‖  over unit-slope features
φ_j(x) = [s_j(x − t_j)]₊ (Bach 2017, "Breaking the curse of dimensionality with convex neural networks";
Savarese et al. 2019 §3), a lower bound on every net's objective. Its Lagrange dual, with α = 2ρβ, is
    max_β D(β) = 2ρ(−⟨β, y⟩ − (Nρ/2)‖β‖²)   over  Σ_i β_i = 0,  ‖Φ_jᵀβ‖ ≤ 1 for every feature,
and any feasible β gives D(β) ≤ min ≤ objective(θ). The constraint is piecewise linear in the kink between
data points and constant beyond them once Σβ = 0, so kinks at the M distinct data points (2M features,
s = ±1) state both problems exactly. The dual is a QP over second-order cones, solved by Clarabel's
interior-point method to 10⁻¹⁰; the multipliers of its cone constraints are the primal coefficients η_j.
At the minimum the net's own point β = (f − y)/(Nρ) is the dual optimum (so it violates the constraint by a
factor ≤ 1), and with the exact dual the gap objective − D is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from ..models.base import RepModel
from ..objective import data_loss, reg_scale_factor
from .arrays import as_f64, float64_inputs, float64_model

MAX_POINTS = 500  # the dual's constraint matrix is dense (2M × N): ~2 s at N = 500, ~10 s and less accurate at 1,000
_ZERO = 1e-7  # multipliers below this fraction of the largest are the solver's zeros (inactive constraints)
IDLE = 1e-3  # a unit carrying at most this fraction of the net's path mass may be re-placed (insert_units)


@dataclass(frozen=True)
class TwoLayerNet:
    """h(x) = Σ_k a_k [w_kᵀx + b_k]₊ + c: W (K, d) with rows the units' inner weights, b (K,), a (K,) for a scalar
    output or (K, d_out) with c (d_out,)."""

    W: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: float | np.ndarray = 0.0

    def __call__(self, x) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        return np.maximum(x @ self.W.T + self.b, 0.0) @ self.a + self.c


def balanced_net(kinks: np.ndarray, signs: np.ndarray, eta: np.ndarray, c: np.ndarray) -> TwoLayerNet:
    """Σ_k η_k[s_k(x − t_k)]₊ + c on R (kinks t_k, sides s_k = ±1, η (K, d_out), c (d_out,)) as the balanced net:
    w_k = s_k√‖η_k‖ = ±‖a_k‖, b_k = −w_k t_k, so ½(‖a‖² + ‖w‖²) = Σ_k‖η_k‖."""
    root = np.sqrt(np.linalg.norm(eta, axis=1))
    w = signs * root
    return TwoLayerNet(w[:, None], eta / np.where(root > 0, root, 1.0)[:, None], -w * kinks, c)


def features(x: np.ndarray, kinks: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """Φ (N, K): [s_j(x − t_j)]₊ on the inputs x (N,)."""
    return np.maximum(signs[None, :] * (x[:, None] - kinks[None, :]), 0.0)


def both_sides(kinks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(kinks, signs) with every kink twice: s = +1, then s = −1."""
    return np.concatenate([kinks, kinks]), np.repeat([1.0, -1.0], kinks.size)


def distinct(x, y) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of x (N,) or (N, d), sorted, with their y; ValueError where a repeated x has two ys
    (nothing interpolates) or the data are empty."""
    x, y = as_f64(x), as_f64(y)
    if x.shape[:1] != y.shape[:1] or x.size == 0:
        raise ValueError("x and y must be non-empty and of equal length")
    _, first, inv = np.unique(x, axis=0, return_index=True, return_inverse=True)
    if not np.allclose(y, y[first][inv.reshape(-1)]):
        raise ValueError("repeated x with different y: no interpolant exists")
    return x[first], y[first]


# ----------------------------------------------------------------------------------------------
# The exact function of a net R → R (Savarese Thm 3.1)
# ----------------------------------------------------------------------------------------------


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
    for W, b in zip(Ws[:-1], bs[:-1]):
        Z, SZ = H @ W.T + b, S @ W.T
        # zero crossings, each computed from the segment end nearer to it (none while t is one knot)
        new = [t]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
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
    H, S = H @ Ws[-1].T + bs[-1], S @ Ws[-1].T
    return PiecewiseLinear1D(t, H[:, 0].copy(), S[:, 0].copy())


# ----------------------------------------------------------------------------------------------
# The spline minimum (Savarese Thm 3.3)
# ----------------------------------------------------------------------------------------------


def _interior_slopes(x, y):
    """Sorted distinct x, y, l_1, …, l_{N−1} of Savarese eq. (26), T = Σ|l_{n+1} − l_n| over them, s = |l_1 + l_{N−1}|."""
    x, y = distinct(as_f64(x).reshape(-1), as_f64(y).reshape(-1))
    l = np.diff(y) / np.diff(x)
    T = float(np.sum(np.abs(np.diff(l))))
    s = abs(float(l[0] + l[-1])) if l.size else 0.0
    return x, y, l, T, s


def spline_min_cost(x, y) -> float:
    """min R̄(f) over f with f(x_n) = y_n, = max(T, (T + |l_1 + l_{N−1}|)/2) (Savarese Thm 3.3, eq. 27 minimised)."""
    _, _, _, T, s = _interior_slopes(x, y)
    return max(T, 0.5 * (T + s))  # one point: T = s = 0, the constant function


def linear_spline_interpolant(x, y) -> PiecewiseLinear1D:
    """The minimiser of Savarese Thm 3.3: linear spline through the data with end slopes l_0, l_N minimising eq. (27)."""
    x, y, l, T, s = _interior_slopes(x, y)
    if x.size == 1:
        return PiecewiseLinear1D(x, y, np.zeros(2))
    l0, lN = float(l[0]), float(l[-1])
    shift = 0.25 * max(s - T, 0.0) * np.sign(l0 + lN)  # total change (s − T)/2 where s > T, split evenly
    return PiecewiseLinear1D(x, y, np.concatenate([[l0 - shift], l, [lN - shift]]))


def min_norm_relu_net_1d(f: PiecewiseLinear1D) -> TwoLayerNet:
    """The balanced net realising f with cost Σ‖η_k‖ = R̄(f) (Savarese Thm 3.1 proof, eqs. 18–22).

    α₊ = f″ (jumps u_i); α₋ is chosen as in the proof: α₋ = t|f″| with t = S/Σ|u_i| when
    |S| ≤ Σ|u_i| (S = f′(−∞) + f′(+∞)), else α₋ = sign(S)|f″| plus a point mass S − sign(S)Σ|u_i|
    at the first knot. Forward units [x − x_i]₊ get α(+1) = (α₊ + α₋)/2, backward units
    [x_i − x]₊ get α(−1) = (α₊ − α₋)/2.
    """
    u = f.jumps
    S = float(f.slopes[0]) + float(f.slopes[-1])  # f′(−∞) + f′(+∞)
    U = float(np.sum(np.abs(u)))
    if abs(S) <= U:
        alpha_minus, extra = (S / U) * np.abs(u) if U > 0 else np.zeros_like(u), 0.0
    else:
        alpha_minus, extra = np.sign(S) * np.abs(u), S - np.sign(S) * U
    fwd = 0.5 * (u + alpha_minus)
    bwd = 0.5 * (u - alpha_minus)
    fwd[0] += 0.5 * extra
    bwd[0] -= 0.5 * extra
    eta = np.concatenate([fwd, bwd])
    kinks, signs = both_sides(f.knots)
    keep = eta != 0
    kinks, signs, eta = kinks[keep], signs[keep], eta[keep, None]
    return balanced_net(kinks, signs, eta, f(f.knots[:1]) - features(f.knots[:1], kinks, signs)[0] @ eta)


# ----------------------------------------------------------------------------------------------
# The convex problem, its dual and the duality gap
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvexMinimum:
    """A convex problem's minimiser `net` (balanced, nonzero units only), `value` (its objective) and `lower_bound`
    ≤ the minimum ≤ value, the dual objective at a feasible dual point made from the solver's."""

    net: TwoLayerNet
    value: float
    lower_bound: float

    @property
    def gap(self) -> float:
        """Relative duality gap (value − lower bound) / value (0 when the value is 0)."""
        return (self.value - self.lower_bound) / self.value if self.value > 0 else 0.0


def dual_at(beta: np.ndarray, phi: np.ndarray, y: np.ndarray, rho: float) -> tuple[float, float]:
    """D(β) = 2ρ(−⟨β, y⟩ − (Nρ/2)‖β‖²) at β (N, d) made feasible: centred (Σβ = 0) and scaled into
    max_j ‖Φ_jᵀβ‖ ≤ 1; and that sup before scaling."""
    beta = beta - beta.mean(axis=0, keepdims=True)
    sup = float(np.linalg.norm(phi.T @ beta, axis=1).max())
    beta = beta / sup if sup > 1 else beta
    return 2 * rho * float(-(beta * y).sum() - y.shape[0] * rho / 2 * (beta ** 2).sum()), sup


def convex_minimum(x: np.ndarray, y: np.ndarray, rho: float) -> ConvexMinimum:
    """The convex problem's minimiser and dual on 1-D data x (N,), y (N,) or (N, d_out), at ρ > 0; ValueError
    beyond MAX_POINTS points."""
    import clarabel  # loaded only where a run solves the problem
    from scipy import sparse

    x = as_f64(x).reshape(-1)
    y = as_f64(y).reshape(x.size, -1)
    n, d = y.shape
    if n > MAX_POINTS:
        raise ValueError(f"the exact 1-D solve takes at most {MAX_POINTS} points ({n} given)")
    kinks, signs = both_sides(np.unique(x))
    phi = features(x, kinks, signs)
    k = phi.shape[1]
    # min (Nρ/2)‖β‖² + ⟨β, y⟩ (= −D/2ρ) s.t. Σβ = 0 (zero cone) and (1, Φ_jᵀβ) in a second-order cone for each j;
    # Clarabel's form is Aβ + s = b, s in the cones; β is flattened row-major (i, output). Stationarity,
    # Nρβ + y + ν = Σ_j Φ_j z_j, makes the cone multipliers z_j the coefficients η_j of f = y + Nρβ. (Scaled to
    # ½‖β‖² + ⟨β, y⟩/(Nρ) instead, the tiny ρ of the min-norm recipes makes the linear term ~10⁶ and the solver
    # can declare the problem infeasible.)
    cone = np.zeros((k, d + 1, n * d))
    cone[:, 1:, :] = -np.einsum("ij,ab->jaib", phi, np.eye(d)).reshape(k, d, n * d)
    A = sparse.csc_matrix(np.vstack([np.kron(np.ones((1, n)), np.eye(d)), cone.reshape(k * (d + 1), n * d)]))
    b = np.concatenate([np.zeros(d), np.tile(np.concatenate([[1.0], np.zeros(d)]), k)])
    cones = [clarabel.ZeroConeT(d)] + [clarabel.SecondOrderConeT(d + 1)] * k
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-10
    sol = clarabel.DefaultSolver(n * rho * sparse.identity(n * d, format="csc"), y.ravel(), A, b, cones,
                                 settings).solve()
    eta = np.asarray(sol.z)[d:].reshape(k, d + 1)[:, 1:]
    size = np.linalg.norm(eta, axis=1)
    keep = size > _ZERO * size.max()  # none where every multiplier is 0
    eta = eta[keep]
    fit = phi[:, keep] @ eta
    c = (y - fit).mean(axis=0)  # the free offset's optimum given η
    value = float(((fit + c - y) ** 2).sum(axis=1).mean() + 2 * rho * np.linalg.norm(eta, axis=1).sum())
    return ConvexMinimum(balanced_net(kinks[keep], signs[keep], eta, c), value,
                         dual_at(np.asarray(sol.x).reshape(n, d), phi, y, rho)[0])


def two_layer_1d(model: RepModel, x: torch.Tensor, writable: bool = False
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(W (m, 1), b (m,), a (d_out, m), the output bias c or None) of a two-layer ReLU net on 1-D inputs with free
    hidden biases, read through `affine_chain()`; ValueError naming what the model lacks otherwise. `writable`:
    W, b and a must be the model's own parameters (an algorithm will change them in place)."""
    chain = model.affine_chain()  # NotImplementedError naming the family where it is not a chain
    if model.depth != 2 or len(chain.weights) != 2 or x.shape[1] != 1:
        raise ValueError(f"needs depth 2 and 1-D inputs (this net: depth {model.depth}, {x.shape[1]}-D inputs)")
    if chain.slope != 0 or model.structure.biases != "free" or not chain.biases:
        raise ValueError(f"needs a ReLU layer with free biases (the {model.family} net: slope {chain.slope}, "
                         f"biases {model.structure.biases})")
    W, b, a = chain.weights[0], chain.biases[0], chain.weights[1]
    if writable and not all(isinstance(t, torch.nn.Parameter) for t in (W, b, a)):
        raise ValueError(f"the {model.family} family's chain tensors are not its parameters")
    return W, b, a, chain.biases[-1]


def duality_gap(model: RepModel, x: torch.Tensor, y: torch.Tensor, loss: str, lam: float,
                reg_scale: str) -> dict[str, float]:
    """The duality gap of the model's parameters for the objective loss + λ·s·Σ‖p‖², in float64: the best dual
    value found, the gap objective − dual, the gap relative to the objective (`duality_gap_rel`: how far the
    objective is at most above its global minimum over nets of any width), and how far the net's own dual point
    β = (f − y)/(Nρ) violated the constraint (its sup; 1 or less at the global minimum); {} where the model is not
    a two-layer ReLU net on 1-D inputs with free biases, the loss is not MSE or λ = 0.

    The net's own point is one candidate; at most MAX_POINTS points, the exact dual optimum is the other, and the
    better is kept: any feasible point gives a valid bound."""
    if loss != "mse" or not lam > 0:
        return {}
    try:
        two_layer_1d(model, x)
    except (ValueError, NotImplementedError):
        return {}
    m = float64_model(model)
    x, y = float64_inputs(m, x, y)
    rho = lam * reg_scale_factor(reg_scale, m.depth)
    with torch.no_grad():
        f = m(x)
        obj = float(data_loss(f, y, "mse") + rho * m.param_sq_norm())
    x, f, y = as_f64(x).reshape(-1), as_f64(f), as_f64(y)
    n = y.shape[0]
    best, sup = dual_at((f - y) / (n * rho), features(x, *both_sides(np.unique(x))), y, rho)
    if n <= MAX_POINTS:
        best = max(best, convex_minimum(x, y, rho).lower_bound)
    gap = obj - best
    return {"dual_value": best, "duality_gap": gap, "duality_gap_rel": gap / obj if obj > 0 else gap,
            "dual_violation": sup}


# ----------------------------------------------------------------------------------------------
# Placement into a model
# ----------------------------------------------------------------------------------------------


def best_unit(x: np.ndarray, residual: np.ndarray, rho: float) -> tuple[TwoLayerNet, float] | None:
    """The gap feature whose MSE-gradient (2/N)Φᵀr is largest, as one unit with its exact step, and its violation
    ‖(2/N)Φᵀr‖/(2ρ) of the dual constraint (> 1 where it lowers the objective; ∞ when ρ = 0); None without a gap.

    x: (N,) inputs, residual: (N, d_out) = f(x) − y. Kinks sit at the midpoints of the gaps between distinct
    inputs, where training can move them either way. The step minimises (1/N)‖r + φηᵀ‖² + 2ρ‖η‖, a group-lasso
    problem in η with the closed form η = −(Φᵀr/‖φ‖²)·(1 − ρN/‖Φᵀr‖)₊.
    """
    x, r = as_f64(x).reshape(-1), as_f64(residual)
    pts = np.unique(x)
    if pts.size < 2:
        return None
    kinks, signs = both_sides((pts[1:] + pts[:-1]) / 2)
    phi = features(x, kinks, signs)
    n = x.shape[0]
    g = phi.T @ r  # (F, d_out)
    gn = np.linalg.norm(g, axis=1)
    j = int(gn.argmax())
    score = 2.0 * float(gn[j]) / n
    violation = score / (2.0 * rho) if rho > 0 else (float("inf") if score > 0 else 0.0)
    shrink = max(0.0, 1.0 - rho * n / float(gn[j])) if gn[j] > 0 else 0.0
    eta = -g[j] / (phi[:, j] ** 2).sum() * shrink
    return balanced_net(kinks[j:j + 1], signs[j:j + 1], eta[None, :], np.zeros(r.shape[1])), violation


def _kept_if_lower(model: RepModel, x: torch.Tensor, y: torch.Tensor, rho: float, change):
    """Apply `change()` to the net and keep it (returning what it returned) where it returned something and
    lowered MSE + ρΣ‖p‖²; else the model's parameters are restored and None returned."""
    objective = lambda: float(data_loss(model(x), y, "mse") + rho * model.param_sq_norm())  # noqa: E731
    before, saved = objective(), {k: v.clone() for k, v in model.state_dict().items()}
    out = change()
    if out is not None and objective() < before:
        return out
    model.load_state_dict(saved)
    return None


def _write(net: TwoLayerNet, W: torch.Tensor, b: torch.Tensor, a: torch.Tensor, at: slice) -> None:
    """`net`'s units into the model's units `at`."""
    for t, v in zip((W[at, 0], b[at], a[:, at]), (net.W[:, 0], net.b, net.a.T)):
        t.copy_(torch.as_tensor(v, dtype=t.dtype, device=t.device))


def insert_units(model: RepModel, x: torch.Tensor, y: torch.Tensor, n: int, rho: float) -> list[tuple[TwoLayerNet, float]]:
    """Re-place up to n idle units where a new unit lowers MSE + ρΣ‖p‖² most (PhaseConfig.insert_units).

    Two-layer ReLU nets on 1-D inputs with free biases whose chain tensors are the parameters (`two_layer_1d`):
    one at a time, the idle unit of least path mass |w_k|·‖a_k‖ (≤ IDLE of the net's) becomes the best gap
    feature for the current residual (`best_unit`), balanced, while that feature violates the dual condition;
    the rest is unchanged. A conditional-gradient step: it lowers the objective even where every existing unit's
    gradient is zero (a nonconvex local minimum of the finite net). Returns what was inserted (the unit and its
    violation), one entry per unit.
    """
    W, b, a, c = two_layer_1d(model, x, writable=True)
    free_c = isinstance(c, torch.nn.Parameter)
    inserted: list[tuple[TwoLayerNet, float]] = []

    def place(k: int) -> tuple[TwoLayerNet, float] | None:
        if free_c:  # an idle unit can still add a constant a_k·[b_k]₊ (a kink beyond the data): keep it in c
            c.add_((a[:, k:k + 1] * torch.relu(x[:, 0] * W[k, 0] + b[k])).mean(dim=1))
        a[:, k] = 0
        best = best_unit(x[:, 0], model(x) - y, rho)
        if best is None or not best[1] > 1:
            return None
        _write(best[0], W, b, a, slice(k, k + 1))
        return best

    with torch.no_grad():
        mass = W[:, 0].detach().double().abs() * a.detach().double().norm(dim=0)
        idle = [k for k in torch.argsort(mass).tolist() if mass[k] <= IDLE * float(mass.sum())]
        for k in idle[:n]:
            best = _kept_if_lower(model, x, y, rho, lambda: place(k))  # noqa: B023 (called at once, with this k)
            if best is None:  # only a step that lowers it
                break
            inserted.append(best)
    return inserted


def place_convex_minimum(model: RepModel, x: torch.Tensor, y: torch.Tensor, rho: float) -> int:
    """Make the net the minimiser of the convex problem at ρ (PhaseConfig.convex_units): the global minimum of
    MSE + ρΣ‖p‖² over nets of any width (`convex_minimum`), its units balanced, the others zero.

    A fully corrective form of `insert_units`: all units are re-placed at once. Needs a scalar output with a free
    output bias and at least as many units as the minimiser has; kept only if it lowers the objective (returns the
    units placed, 0 if the net was kept).
    """
    W, b, a, c = two_layer_1d(model, x, writable=True)
    if a.shape[0] != 1 or not isinstance(c, torch.nn.Parameter):
        raise ValueError("needs a scalar output with a free output bias")
    net = convex_minimum(x[:, 0], y[:, 0], rho).net
    k = net.a.shape[0]
    if k > W.shape[0]:
        raise ValueError(f"the minimiser has {k} units, the net {W.shape[0]}: raise model.width to at least {k}")

    def place() -> int:
        for t in (W, b, a):
            t.zero_()
        _write(net, W, b, a, slice(0, k))
        c.fill_(float(net.c[0]))
        return k

    with torch.no_grad():
        return _kept_if_lower(model, x, y, rho, place) or 0
