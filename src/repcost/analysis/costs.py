"""Representation costs of Ongie & Willett (L−1 linear layers + one ReLU layer) and their bounds, and the ℓ_{2/L}
cost of parallel sub-networks (Savarese et al. 2019, App. C).

Conventions (docs/ARCHITECTURE.md): W is K × d with row k = unit k's inner weight vector w_k, a is the
length-K outer weight vector (scalar output), depth L = number of weight matrices.  A factored
network is Ws = [W_1, …, W_{L−1}] (W_1 is K_1 × d, rows are outputs) plus a, and its effective
inner matrix is W = W_{L−1}⋯W_1.  All numerics are float64 numpy.

Cost of a *representation* vs cost of a *function*: Φ_L(W, a) (Lemma 3.4) is the cost of the
2-layer representation (W, a) minimised over unit rescalings and over factorisations of W; the
function cost is R_L(f) = min Φ_L(W, a) over all (W, a, b, c) realising f (Lemma 3.3), so
Φ_L(W, a) ≥ R_L(f), with equality at a minimal representation.  For univariate f,
R_L(f) = R_2(f)^{2/L} (Thm 3.1, eq. 9), R_2 = R̄ of :mod:`repcost.analysis.relu_1d`.

Φ_L is found by numerical optimisation over the unit weighting λ (Ongie Lemma 3.4, eq. 14, proof eqs. 31–32):

    Φ_L(W, a) = inf_{λ > 0, ‖λ‖₂ = 1} ‖D_λ⁻¹ D_a W‖_{S_q}^{2/L},   q = 2/(L−1),

with ‖M‖_{S_q} = (Σ_j σ_j(M)^q)^{1/q} the Schatten-q quasi-norm.  By eq. (31) the objective
‖λ‖₂ · ‖D_λ⁻¹ D_a W‖_{S_q} is invariant to scaling λ, so we minimise, over t ∈ R^K with λ = eᵗ,

    F(t) = log‖λ‖₂ + (1/q) log Σ_j σ_j(D_λ⁻¹ B)^q,        B = D_a W,

an unconstrained smooth problem (the rank of D_λ⁻¹B does not depend on λ).  Its gradient is

    ∂F/∂t_k = λ_k²/‖λ‖² − [(M Mᵀ)^{q/2}]_kk / Σ_j σ_j^q,      M = D_λ⁻¹ B,

so a stationary point satisfies λ_k² ∝ [(M Mᵀ)^{q/2}]_kk.  Units with a_k = 0 or w_k = 0 are
dropped first (they contribute nothing and would make the infimum unattained).  Φ_L = exp(F)^{2/L}.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from .arrays import as_f64, as_matrix, as_units, as_vector


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
# Φ_L (Lemma 3.4)
# ----------------------------------------------------------------------------------------------


def reduce_units(W, a):
    """Drop dead units and project D_a W onto its row space: returns (B_r, active, rank, V_r), B_r = D_a W V_r."""
    W, a = as_units(W, a)
    # Row norms rescaled by the largest entry, so units shrunk to ~1e-100 by weight decay do not
    # underflow to a zero norm (their squares would).
    peak = np.max(np.abs(W), axis=1) if W.size else np.zeros(W.shape[0])
    row_norms = np.linalg.norm(W / np.where(peak > 0, peak, 1.0)[:, None], axis=1) * peak
    contrib = np.abs(a) * row_norms  # |a_k|‖w_k‖
    # Units below 1e-100 of the largest contribute nothing measurable to Φ_L: treat them as dead.
    active = contrib > 1e-100 * contrib.max() if contrib.size and contrib.max() > 0 else contrib > 0
    B = a[active, None] * W[active]
    # Rank from the row-normalised matrix: D_λ⁻¹B has the same rank for every λ > 0, and the
    # normalisation keeps tiny-but-genuine units from being swamped by large ones.
    Bn = np.sign(a[active])[:, None] * W[active] / row_norms[active, None]
    _, s, Vt = np.linalg.svd(Bn, full_matrices=False)
    tol = (max(Bn.shape) * np.finfo(float).eps) * s.max(initial=0.0)  # no unit: rank 0
    r = int(np.sum(s > tol))
    Vr = Vt[:r].T
    return B @ Vr, active, r, Vr  # B_r is K' × r, of rank exactly r up to rounding


def _log_norm(t: np.ndarray) -> float:
    """log ‖eᵗ‖₂, computed stably."""
    m = float(t.max())
    return m + 0.5 * float(np.log(np.sum(np.exp(2.0 * (t - m)))))


class _Objective:
    """F(t), ∇F(t) and Hessian-vector products (module docstring), plus a gauge term (Σt)²/(2K).

    F is constant along the all-ones direction (the scale of λ); the gauge term fixes that
    direction without changing the minimum value.  With M = D_λ⁻¹B = U S Zᵀ, φ = Σ σ_i^q,
    c_k = Σ_i σ_i^q U_ki², π_k = λ_k²/‖λ‖² and n_k = (U S)_k (rows of M in the eigenbasis of
    G = MᵀM = Z S² Zᵀ), the Hessian of F is

        2(diag π − ππᵀ) + 2(diag c + P)/φ − q c cᵀ/φ²,
        P_kl = Σ_ij Γ_ij n_ki n_kj n_li n_lj,  Γ = divided differences of μ ↦ μ^{q/2−1} at μ = σ²,

    (differentiate c_k = e^{−2t_k} b_kᵀ G^{q/2−1} b_k with the Daleckii–Krein formula).  A
    Hessian-vector product costs O(K r²), so Newton-CG scales to wide layers.
    """

    def __init__(self, Br: np.ndarray, q: float):
        self.Br, self.q = Br, q
        self._t = None

    def _prepare(self, t: np.ndarray) -> None:
        if self._t is not None and np.array_equal(t, self._t):
            return
        q, K = self.q, t.size
        U, s, _ = np.linalg.svd(np.exp(-t)[:, None] * self.Br, full_matrices=False)
        sq = s**q
        self.phi = float(sq.sum())
        lognorm = _log_norm(t)
        self.pi = np.exp(2.0 * (t - lognorm))
        self.c = (U**2) @ sq
        gauge = t.sum() / K
        self.f = lognorm + np.log(self.phi) / q + 0.5 * K * gauge**2
        self.g = self.pi - self.c / self.phi + gauge
        p = q / 2.0 - 1.0
        logmu = 2.0 * np.log(s)
        dl = logmu[:, None] - logmu[None, :]  # log(μ_i/μ_j)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(dl == 0.0, p, np.expm1(p * dl) / np.expm1(dl))
        self.gamma = ratio * np.exp((p - 1.0) * logmu)[None, :]  # (μ_i^p − μ_j^p)/(μ_i − μ_j)
        self.N = U * s[None, :]
        self._t = t.copy()

    def fun(self, t: np.ndarray):
        self._prepare(t)
        return self.f, self.g.copy()

    def hessp(self, t: np.ndarray, v: np.ndarray) -> np.ndarray:
        self._prepare(t)
        pi, c, phi, N = self.pi, self.c, self.phi, self.N
        # (P v)_k = n_kᵀ (Γ ∘ Nᵀ diag(v) N) n_k, in O(K r²) time and O(K r) memory
        Pv = np.einsum("ki,ij,kj->k", N, self.gamma * (N.T @ (v[:, None] * N)), N, optimize=True)
        return (2.0 * (pi * v - pi * (pi @ v)) + 2.0 * (c * v + Pv) / phi
                - self.q * c * (c @ v) / phi**2 + v.sum() / t.size)


def phi_L_solve(W, a, L: int, *, n_restarts: int = 4, closed_form: bool = True) -> tuple[float, np.ndarray]:
    """Φ_L(W, a) and its optimal λ (‖λ‖₂ = 1, zero on dead units) by minimising Ongie Lemma 3.4 eq. (14)
    (exact-Hessian Newton, restarts)."""
    if int(L) != L or L < 2:
        raise ValueError(f"depth L must be an integer >= 2, got {L}")
    Br, active, r, _ = reduce_units(W, a)
    lam_full = np.zeros(active.size)
    if r == 0:
        return 0.0, lam_full
    weights = np.linalg.norm(Br, axis=1)  # |a_k| ‖w_k‖ on active units

    if closed_form and L == 2:
        # Ongie eq. (13): Φ_2 = Σ|a_k|‖w_k‖, attained at λ_k ∝ (|a_k|‖w_k‖)^{1/2}.
        lam = np.sqrt(weights)
        lam_full[active] = lam / np.linalg.norm(lam)
        return float(weights.sum()), lam_full

    from scipy.optimize import minimize  # scipy loads when Φ_L is solved, not with the module

    q = 2.0 / (L - 1)
    logw = np.log(weights)
    starts = [
        0.5 * logw,  # optimum for L = 2 and for rank-one W (Cor 3.6)
        q / (2.0 + q) * logw,  # optimum for orthonormal rows (Cor 3.7)
        np.zeros_like(logw),  # uniform weighting
    ]
    rng = np.random.default_rng(0)
    n = logw.size
    starts += [starts[i % 3] + rng.normal(size=n) for i in range(n_restarts)]
    obj = _Objective(Br, q)
    # Newton-CG in a trust region with exact Hessian-vector products: converges to ~1e-15; the best start is kept.
    best_t = min((minimize(obj.fun, t0 - t0.mean(), jac=True, hessp=obj.hessp, method="trust-ncg",
                           options={"gtol": 1e-12, "maxiter": 500}) for t0 in starts), key=lambda r: r.fun).x
    f = obj.fun(best_t)[0] - 0.5 * n * best_t.mean() ** 2  # without the gauge term (≈ 0 at the optimum anyway)
    lam_full[active] = np.exp(best_t - _log_norm(best_t))
    return float(np.exp(f * 2.0 / L)), lam_full


def phi_L(W, a, L: int, **kwargs) -> float:
    """Φ_L(W, a) = inf_{λ>0, ‖λ‖₂=1} ‖D_λ⁻¹ D_a W‖_{S_{2/(L−1)}}^{2/L} (Ongie Lemma 3.4, eq. 14)."""
    return phi_L_solve(W, a, L, **kwargs)[0]


# ----------------------------------------------------------------------------------------------
# L = 3 bounds
# ----------------------------------------------------------------------------------------------


def phi3_lower_bound(W, a, Q=None) -> float:
    """Σ_k |a_k⟨q_k, w_k⟩|^{2/3} ≤ Φ_3(W, a) for ‖Q‖₂ ≤ 1 (Ongie Lemma 3.8, eq. 18).

    Q=None takes the best Q, the polar factor of D_λ*⁻¹D_aW at the optimal λ* of Lemma 3.4 (`phi_L_solve`): with it
    the bound equals Φ_3 (Sion's minimax theorem in the proof of Lemma 3.8), and the bound is evaluated from Q itself,
    so it is a certified lower bound on Φ_3 however accurately λ* was found; the gap ``phi_L(W, a, 3) − bound``
    certifies Φ_3.
    """
    W, a = as_units(W, a)
    if Q is None:
        Br, active, _, Vr = reduce_units(W, a)  # Br = B Vr, Vr an orthonormal basis of row(B)
        Q = np.zeros(W.shape)
        U, _, Zt = np.linalg.svd(Br / phi_L_solve(W, a, 3)[1][active, None], full_matrices=False)
        Q[active] = U @ Zt @ Vr.T  # the polar factor of D_λ⁻¹B (B = Br Vrᵀ) lifted back to R^d
    Q = as_matrix(Q, "Q")
    if Q.shape != W.shape:
        raise ValueError(f"Q must have W's shape {W.shape}, got {Q.shape}")
    # Any Q is admissible after scaling it into the spectral-norm unit ball.
    Q = Q / max(1.0, float(np.linalg.norm(Q, 2)) if Q.size else 0.0)
    return float(np.sum(np.abs(a * np.sum(Q * W, axis=1)) ** (2.0 / 3.0)))


def phi3_upper_bound(W, a) -> float:
    """Σ_j (Σ_k |a_k⟨w_k, v_j⟩|)^{2/3} ≥ Φ_3(W, a), V = right singular vectors of W (Ongie Thm 3.9, eq. 19b).

    The bound holds for any V with orthonormal columns whose span contains the row space of W
    (D_λ⁻¹D_aW = Σ_j (D_λ⁻¹D_aW v_j) v_jᵀ, triangle inequality for the nuclear norm, then the
    Prop 3.5 argument); where W has repeated singular values the thin SVD is not unique and the
    value of (19) depends on the basis numpy returns.
    """
    W, a = as_units(W, a)
    _, s, Vt = np.linalg.svd(W, full_matrices=False)
    V = Vt[: int(np.sum(s > max(W.shape) * np.finfo(float).eps * s.max(initial=0.0)))].T  # none for W = 0
    B = a[:, None] * (W @ V)  # entry (k, j) = a_k ⟨w_k, v_j⟩ = a_k u_kj σ_j
    return float(np.sum(np.sum(np.abs(B), axis=0) ** (2.0 / 3.0)))


# ----------------------------------------------------------------------------------------------
# Parallel sub-networks and ℓ_{2/L} sparsity (Savarese et al. 2019, App. C).
#
# A parallel network is h(x) = Σ_i α_i v(𝒲_i, x) (eq. 40) with sub-network
# v(𝒲_i, x) = [W_i^{(L−1)}[⋯[W_i^{(1)} x]₊⋯]₊]₊ (eqs. 41–42, no biases, ReLU after every layer).
# Weights are stacked along a leading sub-network axis: Ws = [W^{(1)} (k, m, d), W^{(2)} (k, m, m), …,
# W^{(L−1)} (k, 1, m)], α of shape (k,), so L = len(Ws) + 1 (depth = number of weight matrices).
# ----------------------------------------------------------------------------------------------


def _layer_sq_norms(Ws: Sequence, alpha) -> tuple[np.ndarray, np.ndarray]:
    """(k, L−1) array of ‖W_i^{(l)}‖²_F, and α (k,)."""
    Ws, alpha = [as_f64(W) for W in Ws], as_f64(alpha).reshape(-1)
    if len(Ws) == 0:
        raise ValueError("Ws must hold at least one layer")
    for l, W in enumerate(Ws, start=1):
        if W.ndim != 3 or W.shape[0] != alpha.shape[0]:
            raise ValueError(f"W^({l}) must have shape (k={alpha.shape[0]}, out, in), got {W.shape}")
    return np.stack([np.sum(W**2, axis=(1, 2)) for W in Ws], axis=1), alpha


def parallel_alpha_normalised(Ws: Sequence, alpha) -> np.ndarray:
    """ᾱ_i = α_i Π_l ‖W_i^{(l)}‖_F, the output weights once every W_i^{(l)} is scaled onto the unit sphere (Savarese
    Thm C.1 proof, eq. 50); 0 for a sub-network with a zero layer (it computes the zero function)."""
    sq, alpha = _layer_sq_norms(Ws, alpha)
    norms = np.sqrt(sq)  # (k, L−1)
    return np.where(np.all(norms > 0, axis=1), alpha * np.prod(norms, axis=1), 0.0)


def l2L_quasinorm(alpha_bar, L: int) -> float:
    """‖ᾱ‖_{2/L}^{2/L} = Σ_i |ᾱ_i|^{2/L}, the cost P_L of the normalised parametrisation (Savarese eqs. 46, 49)."""
    return float(np.sum(np.abs(as_f64(alpha_bar)) ** (2.0 / L)))


def active_subnetworks(Ws: Sequence, alpha, rel_tol: float = 1e-3) -> int:
    """Number of sub-networks with |ᾱ_i| > rel_tol · max_j |ᾱ_j| (‖ᾱ‖_0 of Savarese Thm C.3, with a tolerance)."""
    alpha_bar = np.abs(parallel_alpha_normalised(Ws, alpha))
    return int(np.sum(alpha_bar > rel_tol * alpha_bar.max(initial=0.0)))


def parallel_balance(Ws: Sequence, alpha) -> np.ndarray:
    """Per-sub-network gap (max − min)/max of (‖W_i^{(1)}‖²_F, …, ‖W_i^{(L−1)}‖²_F, α_i²); 0 iff eq. (47) holds (Savarese Cor C.2).

    The gap is in [0, 1]; it is defined as 0 for a sub-network whose parameters are all zero.
    """
    sq, alpha = _layer_sq_norms(Ws, alpha)
    vals = np.concatenate([sq, (alpha**2)[:, None]], axis=1)  # (k, L)
    top = vals.max(axis=1)
    return (top - vals.min(axis=1)) / np.where(top > 0, top, 1.0)  # all zero: 0 / 1
