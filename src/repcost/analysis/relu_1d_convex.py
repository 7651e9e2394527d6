"""The convex 1-D problem behind two-layer ReLU nets, solved exactly together with its dual.

At its balanced points a two-layer ReLU net with free biases on 1-D inputs, trained on MSE + ρΣ‖p‖², is the
problem  min_{η,c} (1/N)‖Φη + c − y‖² + 2ρΣ_j‖η_j‖  over unit-slope features φ_j(x) = [s_j(x − t_j)]₊ (Bach
2017, "Breaking the curse of dimensionality with convex neural networks"; Savarese et al. 2019 §3). Its dual is
    max_β D(β) = 2ρ(−⟨β, y⟩ − (Nρ/2)‖β‖²)   over  Σ_i β_i = 0,  ‖Φ_jᵀβ‖ ≤ 1 for every feature,
whose constraint is piecewise linear in the kink between data points, so kinks at the M distinct data points
(2M features, s = ±1) state both problems exactly. The dual is a QP over second-order cones (absolute values for
a scalar output), solved by Clarabel's interior-point method to 10⁻¹⁰; the multipliers of its cone constraints
are the primal coefficients η_j, and the optimal fit is f* = y + Nρβ*. One solve thus gives the
minimiser and a dual point whose value certifies it: at the solution the two values agree to ~10⁻¹⁰.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .unit_features import unit_features

MAX_POINTS = 500  # the constraint matrix is dense (2M × N): ~2 s at N = 500, ~10 s and less accurate at 1,000
_ZERO = 1e-7  # multipliers below this fraction of the largest are the solver's zeros (inactive constraints)


@dataclass
class ConvexMinimum:
    """The minimiser Σ_j η_j·[s_j(x − t_j)]₊ + c (nonzero features only), `value` its objective; `beta` a feasible
    dual point (N, d_out) and `dual_value` = D(beta) ≤ the minimum ≤ value."""

    kinks: np.ndarray
    signs: np.ndarray
    eta: np.ndarray  # (K, d_out)
    c: np.ndarray  # (d_out,)
    value: float
    beta: np.ndarray
    dual_value: float


def kink_features(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kinks t, signs s, Φ (N, 2M)) of `unit_features` with the kinks at the M distinct values of x (N,)."""
    kinks, signs, phi = unit_features(torch.from_numpy(x), torch.from_numpy(np.unique(x)))
    return kinks.numpy(), signs.numpy(), phi.numpy()


def make_feasible(beta: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, float]:
    """β (N, d) centred (Σβ = 0) and scaled into max_j ‖Φ_jᵀβ‖ ≤ 1; returns it and the sup before scaling."""
    beta = beta - beta.mean(axis=0, keepdims=True)
    sup = float(np.linalg.norm(phi.T @ beta, axis=1).max())
    return (beta / sup if sup > 1 else beta), sup


def dual_value(beta: np.ndarray, y: np.ndarray, rho: float) -> float:
    """D(β) = 2ρ(−⟨β, y⟩ − (Nρ/2)‖β‖²) for a feasible β (N, d)."""
    return 2 * rho * float(-(beta * y).sum() - y.shape[0] * rho / 2 * (beta ** 2).sum())


def convex_minimum(x: np.ndarray, y: np.ndarray, rho: float) -> ConvexMinimum:
    """The convex problem's minimiser and dual on 1-D data x (N,), y (N,) or (N, d_out), at ρ > 0; ValueError
    beyond MAX_POINTS points."""
    import clarabel  # loaded only where a run solves the problem
    from scipy import sparse

    x = np.asarray(x, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(x.size, -1)
    n, d = y.shape
    if n > MAX_POINTS:
        raise ValueError(f"the exact 1-D solve takes at most {MAX_POINTS} points ({n} given)")
    kinks, signs, phi = kink_features(x)
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
    beta, _ = make_feasible(np.asarray(sol.x).reshape(n, d), phi)
    eta = np.asarray(sol.z)[d:].reshape(k, d + 1)[:, 1:]
    size = np.linalg.norm(eta, axis=1)
    keep = size > _ZERO * size.max() if size.max() > 0 else np.zeros(k, dtype=bool)
    eta = eta[keep]
    fit = phi[:, keep] @ eta
    c = (y - fit).mean(axis=0)  # the free offset's optimum given η
    value = float(((fit + c - y) ** 2).sum(axis=1).mean() + 2 * rho * np.linalg.norm(eta, axis=1).sum())
    return ConvexMinimum(kinks[keep], signs[keep], eta, c, value, beta, dual_value(beta, y, rho))
