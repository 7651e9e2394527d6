"""The best new ReLU unit for a 1-D fit: one conditional-gradient step on the infinite-width problem.

A two-layer ReLU net with free biases and weight decay is, at its balanced points, the measure problem
min_μ L(f_μ) + 2ρ‖μ‖₁ over unit features φ_{c,s}(x) = [s(x − c)]₊ (Bach 2017, "Breaking the curse of
dimensionality with convex neural networks"; Savarese et al. 2019 §3). On the data a feature depends on
the gap its kink c falls in and, linearly, on c's place in it; candidates sit at the gaps' midpoints, where
training can move them either way. The problem's optimality (dual) condition is
‖(2/N)Σ_i φ(x_i) r_i‖ ≤ 2ρ for every feature, r = f − y the MSE residual. A feature that violates it is a unit whose addition lowers the objective, even
where every existing unit's gradient is zero (a nonconvex local minimum of the finite net).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class UnitFeature:
    """φ(x) = [s(x − c)]₊ with output weight η (a vector over outputs): adding η·φ is the best single step."""

    kink: float  # c, the midpoint of a gap between consecutive distinct training inputs
    sign: int  # s = ±1: active right (+1) or left (−1) of the kink
    eta: torch.Tensor  # (d_out,): the step along φ that minimises loss + 2ρ‖η‖ exactly
    violation: float  # ‖(2/N)Φᵀr‖ / (2ρ): > 1 where the feature lowers the objective (∞ when ρ = 0)


def unit_features(x: torch.Tensor, kinks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(kinks c, signs s, features Φ (N, 2K)): [s(x − c)]₊ for every kink c of `kinks` (K,) and s = +1, −1, on
    the 1-D inputs x (N,)."""
    c = torch.cat([kinks, kinks])
    s = torch.cat([torch.ones_like(kinks), -torch.ones_like(kinks)])
    return c, s, torch.relu(s[None, :] * (x[:, None] - c[None, :]))


def gap_features(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`unit_features` with c at the M − 1 gap midpoints of the M distinct values of x (none with M < 2)."""
    pts = torch.unique(x)
    return unit_features(x, (pts[1:] + pts[:-1]) / 2)


def best_unit_feature(x: torch.Tensor, residual: torch.Tensor, rho: float) -> UnitFeature | None:
    """The gap feature whose MSE-gradient (2/N)Φᵀr is largest, with its exact step; None without a gap.

    x: (N,) inputs, residual: (N, d_out) = f(x) − y, rho: the coefficient on Σ‖p‖² (λ·s·lam_factor), so a
    balanced unit of path mass m costs 2ρm. The step minimises (1/N)‖r + φηᵀ‖² + 2ρ‖η‖, a group-lasso
    problem in η with the closed form η = −(Φᵀr/‖φ‖²)·(1 − ρN/‖Φᵀr‖)₊.
    """
    x, r = x.to(torch.float64), residual.to(torch.float64)
    kinks, signs, phi = gap_features(x)
    if phi.shape[1] == 0:
        return None
    n = x.shape[0]
    g = phi.T @ r  # (F, d_out)
    gn = g.norm(dim=1)
    j = int(gn.argmax())
    score = 2.0 * float(gn[j]) / n
    violation = score / (2.0 * rho) if rho > 0 else (float("inf") if score > 0 else 0.0)
    shrink = max(0.0, 1.0 - rho * n / float(gn[j])) if float(gn[j]) > 0 else 0.0
    eta = -g[j] / (phi[:, j] ** 2).sum() * shrink
    return UnitFeature(float(kinks[j]), int(signs[j]), eta, violation)
