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
from .phi import phi_L_solve, reduce_units


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


def phi3_lower_bound(W, a, Q=None) -> float:
    """Σ_k |a_k⟨q_k, w_k⟩|^{2/3} ≤ Φ_3(W, a) for ‖Q‖₂ ≤ 1 (Ongie Lemma 3.8, eq. 18); Q=None takes the best Q
    (`phi3_lower_bound_search`)."""
    W, a = as_units(W, a)
    if Q is None:
        return phi3_lower_bound_search(W, a)[0]
    Q = as_matrix(Q, "Q")
    if Q.shape != W.shape:
        raise ValueError(f"Q must have W's shape {W.shape}, got {Q.shape}")
    # Any Q is admissible after scaling it into the spectral-norm unit ball.
    Q = Q / max(1.0, float(np.linalg.norm(Q, 2)) if Q.size else 0.0)
    return float(np.sum(np.abs(a * np.sum(Q * W, axis=1)) ** (2.0 / 3.0)))


def phi3_lower_bound_search(W, a) -> tuple[float, np.ndarray]:
    """The best Lemma 3.8 bound max_Q Σ|a_k⟨q_k,w_k⟩|^{2/3} (Ongie eq. 18) and its Q; returns (bound, Q).

    The maximiser is the polar factor of D_λ*⁻¹D_aW at the optimal λ* of Lemma 3.4 (`phi_L_solve`): with it the
    bound equals Φ_3 (Sion's minimax theorem in the proof of Lemma 3.8), and the bound is evaluated from Q itself
    (‖Q‖₂ = 1), so it is a certified lower bound on Φ_3 however accurately λ* was found; the gap
    ``phi_L(W, a, 3) − bound`` certifies Φ_3.
    """
    W, a = as_units(W, a)
    Br, active, r, Vr = reduce_units(W, a)  # Br = B Vr, Vr an orthonormal basis of row(B)
    Q = np.zeros(W.shape)
    if r:
        U, _, Zt = np.linalg.svd(Br / phi_L_solve(W, a, 3)[1][active, None], full_matrices=False)
        Q[active] = U @ Zt @ Vr.T  # the polar factor of D_λ⁻¹B (B = Br Vrᵀ) lifted back to R^d
    return phi3_lower_bound(W, a, Q), Q


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
