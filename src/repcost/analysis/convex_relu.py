"""Exact minimum of the two-layer ReLU representation cost R2 on low-dimensional data (convex program).

Problem.  Over nets h(x) = Σ_k a_k [w_kᵀx + b_k]₊ + c of any width, with *free* biases b_k and
output offset c, interpolating h(x_i) = y_i, minimise

    C(θ) = ½(‖a‖² + Σ_k ‖w_k‖²)   ⇔ (rescale each unit to |a_k| = ‖w_k‖)   Σ_k |a_k| ‖w_k‖,

the path norm of Ongie & Willett eq. (13) (Φ_2 = `path_norm`, = C_2 at balance, = Savarese et al.
2019's C(θ)).  Its minimum is R2 of the min-norm interpolant (Savarese Thm 3.3 in 1-D).

Convex reformulation (Pilanci & Ergen 2020, "Neural networks are convex regularizers", Thm 1,
adapted to free biases).  Write x̃ = (x, 1) and u = (w, b), so a unit is [x̃ᵀu]₊.  A unit's
activation pattern D = diag(1[X̃u ≥ 0]) is one of the finitely many patterns of *affine*
hyperplanes {x : wᵀx + b = 0} through the data; on the closed cone
K_D = {u : (2D − I)X̃u ≥ 0} the unit is linear, [X̃u]₊ = D X̃u.  Hence

    min  Σ_D ‖w(u_D)‖₂ + ‖w(v_D)‖₂
    s.t. Σ_D D X̃(u_D − v_D) + c·1 = y,   u_D, v_D ∈ K_D,   c free,

where w(u) drops the bias coordinate: the penalty is on w only (the bias is free), so the group
norm is over the non-bias part, and the all-active pattern D = I with w = 0 gives the constant
units that the free offset c already covers.  Exactness, in both directions: (≤) a net's units
grouped by pattern and by sign of a_k sum, inside the convex cone K_D, to a feasible (u_D, v_D)
whose objective is, by the triangle inequality, at most Σ|a_k|‖w_k‖; (≥) each nonzero u_D is the
unit [x̃ᵀu_D]₊ with a = 1, path norm ‖w(u_D)‖.  So the program's value *is* min R2, provided the
patterns enumerated cover every unit: the closures of the chambers of the central arrangement
{u : x̃_iᵀu = 0} cover all u, so the chamber patterns suffice.

Enumeration (exact): in 1-D the chambers are the threshold sets {x ≥ t}, {x ≤ t} (2N + 2
patterns); in 2-D every chamber has an extreme ray x̃_i × x̃_j (the line through two data
points), and near it the points off the line keep their side while the collinear ones are
split by a threshold along the line — O(N²) patterns (O(N³) candidates before deduplication when
many points are collinear, as on rays).

Certificate (weak duality, checked independently of the solver).  For any λ with 1ᵀλ = 0,
λᵀy = Σ_i λ_i h(x_i) = Σ_k a_k Σ_i λ_i [w_kᵀx_i + b_k]₊ ≤ M(λ)·Σ_k|a_k|‖w_k‖ with
M(λ) = sup_{‖w‖=1, b} |Σ_i λ_i [wᵀx_i + b]₊|, so λᵀy / M(λ) ≤ R2 of *every* interpolating net.
We take λ from the solver's equality multipliers and compute M(λ) exactly (the sup over b sits at
b = −wᵀx_j; for d = 2 the sup over w is over finitely many arcs where the active set is fixed).
"""

from __future__ import annotations

import warnings
from itertools import combinations, pairwise, product

import numpy as np

from ..errors import RepcostError
from .arrays import as_f64, as_matrix
from .relu_1d import ConvexMinimum, TwoLayerNet, both_sides, distinct, features


def _threshold_patterns(t: np.ndarray) -> list:
    """Patterns of affine functions of a scalar t: {t ≥ τ} and {t ≤ τ} for every τ (all and none included)."""
    rank = np.argsort(np.argsort(t, kind="stable"), kind="stable")
    up = rank[None, :] >= np.arange(t.size + 1)[:, None]  # row m: all but the m smallest
    return [*up, *~up]


def arrangement_patterns(x: np.ndarray) -> np.ndarray:
    """All chamber patterns 1[wᵀx_i + b > 0] of affine hyperplanes over the rows of x (d ≤ 2), as a P × N bool array.

    Exact (module docstring): every unit [wᵀx + b]₊ is linear on the closed cone of one of them.
    The empty pattern is left out (such a unit is 0 on the data).
    """
    N, d = x.shape
    if d == 1 or N <= 2:
        cands = _threshold_patterns(x[:, 0] if d == 1 else x @ (x[-1] - x[0]))
    else:
        cands = [np.ones(N, dtype=bool)]  # all active: the pairs' lines below leave it out
        scale = float(np.max(np.abs(x - x.mean(axis=0)))) or 1.0
        for i, j in combinations(range(N), 2):
            e = x[j] - x[i]
            n = np.array([-e[1], e[0]])
            s = (x - x[i]) @ n
            on = np.abs(s) <= 1e-12 * scale * np.linalg.norm(n)
            for sign, sub in product((1.0, -1.0), _threshold_patterns(x[on] @ e)):
                p = sign * s > 0
                p[on] = sub
                cands.append(p)
    P = np.unique(np.array(cands, dtype=bool), axis=0)
    return P[P.any(axis=1)]


def _sup_over_units(x: np.ndarray, lam: np.ndarray) -> float:
    """M(λ) = sup_{‖w‖=1, b} |Σ_i λ_i [wᵀx_i + b]₊| for 1ᵀλ = 0, exactly (d = 1 or 2)."""
    N, d = x.shape
    if d == 1:  # w = ±1: the unit-slope features with kinks at the data points
        return float(np.abs(lam @ features(x[:, 0], *both_sides(x[:, 0]))).max())
    best = 0.0
    for j in range(N):
        z = x - x[j]  # b = −wᵀx_j: F_j(w) = Σ_i λ_i [wᵀz_i]₊, positively homogeneous in w
        nz = np.linalg.norm(z, axis=1) > 0
        ang = np.arctan2(z[nz, 1], z[nz, 0])
        brk = np.sort(np.mod(np.concatenate([ang + np.pi / 2, ang - np.pi / 2]), 2 * np.pi))
        brk = np.concatenate([brk, [brk[0] + 2 * np.pi]]) if brk.size else np.array([0.0, 2 * np.pi])
        for lo, hi in pairwise(brk):
            if hi - lo <= 0:
                continue
            mid = 0.5 * (lo + hi)
            act = z @ np.array([np.cos(mid), np.sin(mid)]) > 0  # active set, fixed on (lo, hi)
            v = lam[act] @ z[act]  # (0, 0) where none is active
            ends = [abs(np.cos(p) * v[0] + np.sin(p) * v[1]) for p in (lo, hi)]
            best = max(best, *ends)
            for phi in (np.arctan2(v[1], v[0]), np.arctan2(-v[1], -v[0])):  # ±v inside the arc: |wᵀv| = ‖v‖
                if (np.mod(phi - lo, 2 * np.pi)) < hi - lo:
                    best = max(best, float(np.linalg.norm(v)))
    return best


def dual_bound(x: np.ndarray, y, lam) -> float:
    """λᵀy / M(λ) after centring λ (1ᵀλ = 0): a lower bound on R2 of every interpolant of (x (N, d ≤ 2), y)."""
    y = as_f64(y).reshape(-1)
    lam = as_f64(lam).reshape(-1)
    lam = lam - lam.mean()  # the free offset c forces 1ᵀλ = 0
    M = _sup_over_units(x, lam)
    return abs(float(lam @ y)) / M if M > 0 else 0.0  # the bound holds for ±λ (M has |·|): the one with λᵀy ≥ 0


def min_r2_interpolant(x, y) -> ConvexMinimum:
    """min Σ_k|a_k|‖w_k‖ (= min ½(‖a‖² + ‖W‖²)) over 2-layer ReLU nets with free biases interpolating (x, y), d ≤ 2.

    Solved as the convex program of the module docstring (Pilanci & Ergen 2020, with free biases)
    by cvxpy; the data are centred and scaled for the solver and the answer mapped back
    (R2 scales as y / x).  Returns the balanced minimising net, the value and an independent dual lower bound.
    """
    try:
        import cvxpy as cp  # optional heavy dependency (the `convex` extra): imported only here
    except ImportError:
        raise RepcostError("min_r2_interpolant needs cvxpy: pip install 'repcost[convex]' (or pip install cvxpy)") \
            from None

    x = as_matrix(x, "x")
    if x.shape[1] not in (1, 2):
        raise NotImplementedError(f"exact arrangement enumeration is implemented for d = 1 and 2, got x of shape {x.shape}")
    x, y = distinct(x, as_f64(y).reshape(-1))  # ValueError for mismatched or empty data
    N, d = x.shape
    if N == 1 or np.ptp(y) == 0:
        return ConvexMinimum(TwoLayerNet(np.zeros((0, d)), np.zeros(0), np.zeros(0), float(y[0])), 0.0, 0.0)
    # Standardise: x' = (x − m)/sx, y' = y/sy. A unit's w' = sx·w, so R2(x, y) = sy/sx · R2(x', y').
    m, sx, sy = x.mean(axis=0), float(np.max(np.abs(x - x.mean(axis=0)))), float(np.max(np.abs(y)))
    xs, ys = (x - m) / sx, y / sy
    D = arrangement_patterns(xs).astype(np.float64)  # P × N
    P = D.shape[0]
    Xt = np.hstack([xs, np.ones((N, 1))])
    U, V, c = cp.Variable((P, d + 1)), cp.Variable((P, d + 1)), cp.Variable()
    S = 2 * D - 1
    fit = cp.sum(cp.multiply(D.T, Xt @ (U - V).T), axis=1) + c
    eq = fit == ys
    cons = [eq, cp.multiply(S.T, Xt @ U.T) >= 0, cp.multiply(S.T, Xt @ V.T) >= 0]
    obj = cp.sum(cp.norm(U[:, :d], 2, axis=1)) + cp.sum(cp.norm(V[:, :d], 2, axis=1))
    prob = cp.Problem(cp.Minimize(obj), cons)
    with warnings.catch_warnings():  # "may be inaccurate": the dual certificate below says how accurate
        warnings.simplefilter("ignore", UserWarning)
        prob.solve(solver="CLARABEL")
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"convex R2 program: the solver ended with status {prob.status}")

    # Units back in the original coordinates: [w'ᵀx' + b']₊ = [(w'/sx)ᵀx + b' − w'ᵀm/sx]₊, output × sy.
    units = np.vstack([U.value, V.value])
    signs = np.concatenate([np.ones(P), -np.ones(P)])
    norms = np.linalg.norm(units[:, :d], axis=1)
    keep = norms > 1e-8 * max(float(norms.max()), 1e-300)  # the solver's zeros
    w = units[keep, :d] / sx
    b = units[keep, d] - w @ m
    # unit output sy·±[wᵀx + b]₊, balanced: |a_k| = ‖W_k‖ = √(sy‖w_k‖), W_k = sy·w_k/|a_k|, b_k likewise
    scale = np.sqrt(sy * np.linalg.norm(w, axis=1))
    a = signs[keep] * scale
    W = w * (sy / scale)[:, None]
    b = b * (sy / scale)
    # the offset fitted afresh: it also carries the constant units (w ≈ 0, pattern all-active) pruned above
    net = TwoLayerNet(W, a, b, float(np.mean(y - TwoLayerNet(W, a, b)(x))))
    value = float(np.sum(np.abs(a) * np.linalg.norm(W, axis=1)))
    lower = dual_bound(x, y, -np.asarray(eq.dual_value, dtype=np.float64).reshape(-1))
    return ConvexMinimum(net, value, lower)
