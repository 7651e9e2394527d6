"""Kernel ridge regression baseline and the rank of its Jacobian (Jacot 2023 App. D).

For a translation- and rotation-invariant kernel K(x, y) = k(‖x − y‖) the KRR predictor is
f̂(x) = K(x, X)(K(X, X) + ρI)⁻¹Y (ρ = 0 in the paper), and its Jacobian is

    Jf̂(x) = Σ_i α_i ∇_x k(‖x − x_i‖)ᵀ = Σ_i α_i (x − x_i)ᵀ k′(r_i)/r_i,   α = (K + ρI)⁻¹Y,

i.e. (paper's notation, samples as columns) JK(x, X)·K⁻¹Y with JK(x, X) = (X − x)diag(k′(r)/r).
Its rank is generically min{Rank(X − x), Rank Y} = min{N, d_in, d_out}: KRR does not recover
the rank of a low-rank true function (App. D; footnote 1 of §4). Samples are rows here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .arrays import as_f64, as_matrix, sq_distances


@dataclass
class KRR:
    """A fitted kernel ridge regressor f̂(x) = K(x, X)α with the Gaussian kernel k = exp(−r²/2h²) (samples as rows)."""

    x_train: np.ndarray = field(repr=False)
    alpha: np.ndarray = field(repr=False)  # (N, d_out) = (K + ρI)⁻¹Y
    bandwidth: float

    def predict(self, x) -> np.ndarray:
        """f̂(x) (M, d_out)."""
        h = self.bandwidth
        return np.exp(-sq_distances(as_f64(x), self.x_train) / (2 * h * h)) @ self.alpha

    def jacobians(self, x) -> np.ndarray:
        """Jf̂(x) (M, d_out, d_in) = Σ_i α_i (x − x_i)ᵀ k′(r_i)/r_i, with k′(r)/r = −k/h²."""
        x = np.atleast_2d(as_f64(x))
        h2 = self.bandwidth * self.bandwidth
        w = -np.exp(-sq_distances(x, self.x_train) / (2 * h2)) / h2  # (M, N)
        # Σ_i w_mi α_i (x_m − x_i)ᵀ = (αᵀ w_m) x_mᵀ − αᵀ diag(w_m) X
        t1 = np.einsum("mi,io->mo", w, self.alpha)[:, :, None] * x[:, None, :]
        t2 = np.einsum("mi,io,id->mod", w, self.alpha, self.x_train)
        return t1 - t2


def fit_krr(x, y, ridge: float = 1e-6) -> KRR:
    """Fit f̂ = K(·, X)(K(X, X) + ρ N I)⁻¹Y (ρ scaled by N; the bandwidth is the median pairwise distance of the
    rows of x, a standard choice)."""
    x, y = as_f64(x), as_matrix(y, "y")
    r2 = sq_distances(x, x)
    h = float(np.median(np.sqrt(r2)[np.triu_indices(len(x), 1)]))
    alpha = np.linalg.solve(np.exp(-r2 / (2 * h * h)) + ridge * len(x) * np.eye(len(x)), y)
    return KRR(x, alpha, h)
