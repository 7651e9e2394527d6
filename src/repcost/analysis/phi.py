"""Φ_L(W, a) of Ongie & Willett, Lemma 3.4, by numerical optimisation over the unit weighting λ.

Ongie Lemma 3.4 (eq. 14, proof eqs. 31–32):

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

import numpy as np

from .arrays import as_units


DEAD_UNIT_RTOL = 1e-100


def reduce_units(W, a):
    """Drop dead units and project D_a W onto its row space: returns (B_r, active, rank, V_r), B_r = D_a W V_r."""
    W, a = as_units(W, a)
    # Row norms rescaled by the largest entry, so units shrunk to ~1e-100 by weight decay do not
    # underflow to a zero norm (their squares would).
    peak = np.max(np.abs(W), axis=1) if W.size else np.zeros(W.shape[0])
    row_norms = np.linalg.norm(W / np.where(peak > 0, peak, 1.0)[:, None], axis=1) * peak
    contrib = np.abs(a) * row_norms  # |a_k|‖w_k‖
    # Units below 1e-100 of the largest contribute nothing measurable to Φ_L: treat them as dead.
    active = contrib > DEAD_UNIT_RTOL * contrib.max() if contrib.size and contrib.max() > 0 else contrib > 0
    B = a[active, None] * W[active]
    if B.shape[0] == 0:
        return np.zeros((0, 0)), active, 0, np.zeros((W.shape[1], 0))
    # Rank from the row-normalised matrix: D_λ⁻¹B has the same rank for every λ > 0, and the
    # normalisation keeps tiny-but-genuine units from being swamped by large ones.
    Bn = np.sign(a[active])[:, None] * W[active] / row_norms[active, None]
    _, s, Vt = np.linalg.svd(Bn, full_matrices=False)
    tol = (max(Bn.shape) * np.finfo(float).eps) * s[0]
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
    best_t, best_f = None, np.inf
    for t0 in starts:
        # Newton-CG in a trust region with exact Hessian-vector products: converges to ~1e-15.
        res = minimize(obj.fun, t0 - t0.mean(), jac=True, hessp=obj.hessp, method="trust-ncg",
                       options={"gtol": 1e-12, "maxiter": 500})
        if res.fun < best_f:
            best_t, best_f = res.x, float(res.fun)
    f = obj.fun(best_t)[0] - 0.5 * n * best_t.mean() ** 2  # without the gauge term (≈ 0 at the optimum anyway)
    lam_full[active] = np.exp(best_t - _log_norm(best_t))
    return float(np.exp(f * 2.0 / L)), lam_full


def phi_L(W, a, L: int, **kwargs) -> float:
    """Φ_L(W, a) = inf_{λ>0, ‖λ‖₂=1} ‖D_λ⁻¹ D_a W‖_{S_{2/(L−1)}}^{2/L} (Ongie Lemma 3.4, eq. 14)."""
    return phi_L_solve(W, a, L, **kwargs)[0]
