"""Representation costs of Ongie & Willett (L−1 linear layers + one ReLU layer) and their bounds.

Conventions (docs/ARCHITECTURE.md): W is K × d with row k = unit k's inner weight vector w_k, a is the
length-K outer weight vector (scalar output), depth L = number of weight matrices.  A factored
network is Ws = [W_1, …, W_{L−1}] (W_1 is K_1 × d, rows are outputs) plus a, and its effective
inner matrix is W = W_{L−1}⋯W_1.  All numerics are float64 numpy.

Cost of a *representation* vs cost of a *function*: Φ_L(W, a) (Lemma 3.4) is the cost of the
2-layer representation (W, a) minimised over unit rescalings and over factorisations of W; the
function cost is R_L(f) = min Φ_L(W, a) over all (W, a, b, c) realising f (Lemma 3.3), so
Φ_L(W, a) ≥ R_L(f), with equality at a minimal representation.  For univariate f,
R_L(f) = R_2(f)^{2/L} (Thm 3.1, eq. 9), R_2 = R̄ of :mod:`repcost.analysis.function_1d`.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from .arrays import as_matrix, as_units, as_vector
from .phi import _Objective, phi_L_solve, reduce_units


def path_norm(W, a) -> float:
    """Path norm Σ_k |a_k| ‖w_k‖₂ = Φ_2(W, a), the R_2 cost of a 2-layer representation (Ongie eq. 13)."""
    W, a = as_units(W, a)
    return float(np.sum(np.abs(a) * np.linalg.norm(W, axis=1)))


def effective_matrix(Ws: Sequence) -> np.ndarray:
    """Effective inner matrix W = W_{L−1}⋯W_1 of a factored network (Ongie §2, h = aᵀ[W_{L−1}⋯W_1 x + b]₊ + c)."""
    if len(Ws) == 0:
        raise ValueError("Ws must hold at least one matrix W_1")
    Ws = [as_matrix(Wi, f"W_{i}") for i, Wi in enumerate(Ws, start=1)]
    return functools.reduce(lambda M, Wi: Wi @ M, Ws[1:], Ws[0])  # W_{L−1}(⋯(W_2 W_1))


def cost_CL(Ws: Sequence, a) -> float:
    """C_L(θ) = (1/L)(‖a‖² + Σ_i ‖W_i‖²_F) with L = len(Ws) + 1 (Ongie eq. 4; Savarese's C(θ) when L = 2)."""
    a = as_vector(a, "a")
    L = len(Ws) + 1
    return float((a @ a + sum(np.sum(as_matrix(Wi) ** 2) for Wi in Ws)) / L)


# ----------------------------------------------------------------------------------------------
# L = 3 bounds
# ----------------------------------------------------------------------------------------------


def phi3_lower_bound(W, a, Q=None, **search_kwargs) -> float:
    """Σ_k |a_k⟨q_k, w_k⟩|^{2/3} ≤ Φ_3(W, a) for ‖Q‖₂ ≤ 1 (Ongie Lemma 3.8, eq. 18); Q=None searches Q."""
    W, a = as_units(W, a)
    if Q is None:
        return phi3_lower_bound_search(W, a, **search_kwargs)[0]
    Q = as_matrix(Q, "Q")
    if Q.shape != W.shape:
        raise ValueError(f"Q must have W's shape {W.shape}, got {Q.shape}")
    # Any Q is admissible after scaling it into the spectral-norm unit ball.
    Q = Q / max(1.0, float(np.linalg.norm(Q, 2)) if Q.size else 0.0)
    return float(np.sum(np.abs(a * np.sum(Q * W, axis=1)) ** (2.0 / 3.0)))


def _dual_objective(t: np.ndarray, obj: _Objective):
    """G(t) = Σ_k |⟨q_k, b_k⟩|^{2/3} at Q = polar(D_λ⁻¹B), λ = eᵗ, and ∇G.

    ⟨q_k, b_k⟩ = λ_k [(MMᵀ)^{1/2}]_kk = λ_k c_k ≥ 0 with M = D_λ⁻¹B, and ∂(λ_k c_k)/∂t_l =
    −λ_k (δ_kl c_k + 2 P_kl) with c, P those of the q = 1 objective in :mod:`phi` (Daleckii–Krein).
    """
    obj._prepare(t)
    lam = np.exp(t)
    z = np.maximum(lam * obj.c, 0.0)
    G = float(np.sum(z ** (2.0 / 3.0)))
    w = np.where(z > 0, lam * np.where(z > 0, z, 1.0) ** (-1.0 / 3.0), 0.0)
    Pw = obj.P_times(w)
    grad = -(2.0 / 3.0) * (z ** (2.0 / 3.0) + 2.0 * Pw)
    return G, grad


def phi3_lower_bound_search(
    W, a, *, n_restarts: int = 1, seed: int = 0, use_primal: bool = True
) -> tuple[float, np.ndarray]:
    """Best Lemma 3.8 bound max_Q Σ|a_k⟨q_k,w_k⟩|^{2/3} over Q = polar(D_λ⁻¹D_aW) (Ongie eq. 18); returns (bound, Q).

    Every candidate Q has ‖Q‖₂ = 1, so the result is a certified lower bound on Φ_3 whatever the
    search finds.  The dual optimum is the polar factor of D_λ*⁻¹D_aW at the primal optimum λ*
    (then the bound equals Φ_3, by Sion's minimax theorem in the proof of Lemma 3.8); the search
    maximises over λ with L-BFGS from heuristic starts, and with ``use_primal`` also from λ*
    (computed by :func:`phi_L_solve`), so the gap ``phi_L(W, a, 3) − bound`` certifies Φ_3.
    """
    W, a = as_units(W, a)
    K, d = W.shape
    Br, active, r, Vr = reduce_units(W, a)  # Br = B Vr, Vr an orthonormal basis of row(B)
    Q_full = np.zeros((K, d))
    if r == 0:
        return 0.0, Q_full
    B = a[active, None] * W[active]
    obj = _Objective(Br, 1.0)
    logw = np.log(np.linalg.norm(Br, axis=1))
    rng = np.random.default_rng(seed)
    starts = [0.5 * logw, np.zeros_like(logw), 0.6 * logw]
    starts += [0.5 * logw + rng.normal(size=logw.size) for _ in range(n_restarts)]
    if use_primal:
        starts.append(np.log(phi_L_solve(W, a, 3).lam[active]))

    from scipy.optimize import minimize  # scipy loads when a bound is computed, not with the module

    def neg(t):
        G, grad = _dual_objective(t, obj)
        return -G, -grad

    best_val, best_Q = -np.inf, None
    for t0 in starts:
        t0 = t0 - t0.mean()
        res = minimize(neg, t0, jac=True, method="L-BFGS-B",
                       options={"gtol": 1e-10, "ftol": 1e-14, "maxiter": 1000})
        for t in (t0, res.x):  # keep the start too, in case the optimiser only made it worse
            U, _, Zt = np.linalg.svd(np.exp(-t)[:, None] * Br, full_matrices=False)
            Q = U @ Zt @ Vr.T  # the polar factor of D_λ⁻¹B (λ = eᵗ, B = Br Vrᵀ) lifted back to R^d: ‖Q‖₂ = 1
            val = float(np.sum(np.abs(np.sum(Q * B, axis=1)) ** (2.0 / 3.0)))  # eq. (18), from Q itself
            if val > best_val:
                best_val, best_Q = val, Q
    Q_full[active] = best_Q
    return best_val, Q_full


def phi3_upper_bound(W, a) -> float:
    """Σ_j (Σ_k |a_k⟨w_k, v_j⟩|)^{2/3} ≥ Φ_3(W, a), V = right singular vectors of W (Ongie Thm 3.9, eq. 19b).

    The bound holds for any V with orthonormal columns whose span contains the row space of W
    (D_λ⁻¹D_aW = Σ_j (D_λ⁻¹D_aW v_j) v_jᵀ, triangle inequality for the nuclear norm, then the
    Prop 3.5 argument); where W has repeated singular values the thin SVD is not unique and the
    value of (19) depends on the basis numpy returns.
    """
    W, a = as_units(W, a)
    _, s, Vt = np.linalg.svd(W, full_matrices=False)
    if s.size == 0 or s[0] == 0:
        return 0.0
    V = Vt[: int(np.sum(s > max(W.shape) * np.finfo(float).eps * s[0]))].T
    B = a[:, None] * (W @ V)  # entry (k, j) = a_k ⟨w_k, v_j⟩ = a_k u_kj σ_j
    return float(np.sum(np.sum(np.abs(B), axis=0) ** (2.0 / 3.0)))
