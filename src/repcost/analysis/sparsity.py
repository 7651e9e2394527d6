"""Parallel sub-networks and ℓ_{2/L} sparsity (Savarese et al. 2019, App. C).

A parallel network is h(x) = Σ_i α_i v(𝒲_i, x) (eq. 40) with sub-network
v(𝒲_i, x) = [W_i^{(L−1)}[⋯[W_i^{(1)} x]₊⋯]₊]₊ (eqs. 41–42, no biases, ReLU after every layer).
Weights are stacked along a leading sub-network axis: Ws = [W^{(1)} (k, m, d), W^{(2)} (k, m, m), …,
W^{(L−1)} (k, 1, m)], α of shape (k,), so L = len(Ws) + 1 (depth = number of weight matrices).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .arrays import as_f64


def _stack(Ws: Sequence, alpha):
    Ws, alpha = [as_f64(W) for W in Ws], as_f64(alpha).reshape(-1)
    if len(Ws) == 0:
        raise ValueError("Ws must hold at least one layer")
    for l, W in enumerate(Ws, start=1):
        if W.ndim != 3 or W.shape[0] != alpha.shape[0]:
            raise ValueError(f"W^({l}) must have shape (k={alpha.shape[0]}, out, in), got {W.shape}")
    return Ws, alpha


def _layer_sq_norms(Ws) -> np.ndarray:
    """(k, L−1) array of ‖W_i^{(l)}‖²_F."""
    return np.stack([np.sum(W**2, axis=(1, 2)) for W in Ws], axis=1)


def parallel_alpha_normalised(Ws: Sequence, alpha) -> np.ndarray:
    """ᾱ_i = α_i Π_l ‖W_i^{(l)}‖_F, the output weights once every W_i^{(l)} is scaled onto the unit sphere (Savarese
    Thm C.1 proof, eq. 50); 0 for a sub-network with a zero layer (it computes the zero function)."""
    Ws, alpha = _stack(Ws, alpha)
    norms = np.sqrt(_layer_sq_norms(Ws))  # (k, L−1)
    return np.where(np.all(norms > 0, axis=1), alpha * np.prod(norms, axis=1), 0.0)


def l2L_quasinorm(alpha_bar, L: int) -> float:
    """‖ᾱ‖_{2/L}^{2/L} = Σ_i |ᾱ_i|^{2/L}, the cost P_L of the normalised parametrisation (Savarese eqs. 46, 49)."""
    alpha_bar = as_f64(alpha_bar).reshape(-1)
    return float(np.sum(np.abs(alpha_bar) ** (2.0 / L)))


def active_subnetworks(Ws: Sequence, alpha, rel_tol: float = 1e-3) -> int:
    """Number of sub-networks with |ᾱ_i| > rel_tol · max_j |ᾱ_j| (‖ᾱ‖_0 of Savarese Thm C.3, with a tolerance)."""
    alpha_bar = np.abs(parallel_alpha_normalised(Ws, alpha))
    return int(np.sum(alpha_bar > rel_tol * alpha_bar.max(initial=0.0)))


def parallel_balance(Ws: Sequence, alpha) -> np.ndarray:
    """Per-sub-network gap (max − min)/max of (‖W_i^{(1)}‖²_F, …, ‖W_i^{(L−1)}‖²_F, α_i²); 0 iff eq. (47) holds (Savarese Cor C.2).

    The gap is in [0, 1]; it is defined as 0 for a sub-network whose parameters are all zero.
    """
    Ws, alpha = _stack(Ws, alpha)
    vals = np.concatenate([_layer_sq_norms(Ws), (alpha**2)[:, None]], axis=1)  # (k, L)
    top = vals.max(axis=1)
    gap = (top - vals.min(axis=1)) / np.where(top > 0, top, 1.0)
    return np.where(top > 0, gap, 0.0)
