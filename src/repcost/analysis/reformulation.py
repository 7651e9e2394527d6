"""First reformulation of the L2-regularised loss and its forces (Jacot, Golikov, Hongler, Gabriel 2022, §3.1, Prop 1).

    L^r(Z_1 … Z_L) = C(Z_L) + λ Σ_ℓ ‖Z_ℓ (Z^σ_{ℓ−1})⁺‖²_F,
    Z^σ_0 = [X; β1ᵀ],  Z^σ_ℓ = [σ(Z_ℓ); β1ᵀ].

The paper writes samples as COLUMNS: Z_ℓ is n_ℓ × N. The models here take samples as rows, so
every function below returns / takes paper-oriented matrices (the transpose of `model.hidden`).
The bias row β·1ᵀ is appended only when β > 0 (with β = 0 it is a zero row, which changes
neither the pseudo-inverse norm nor the product). The augmented weight matrix of layer ℓ is
[W_ℓ, b_ℓ] acting on Z^σ_{ℓ−1}, so its squared norm is ‖W_ℓ‖² + ‖b_ℓ‖²: the λ-term of Jacot 2022
with biases regularised (`model.bias_regularised=true`).

Holding the other layers fixed, the two terms of L^r that depend on Z_ℓ are
    attraction term  A(Z_ℓ) = ‖Z_ℓ (Z^σ_{ℓ−1})⁺‖²_F        (pulls Z_ℓ towards the origin)
    repulsion term   R(Z_ℓ) = ‖Z_{ℓ+1} (Z^σ_ℓ)⁺‖²_F         (pushes Z^σ_ℓ away from the origin).
The *forces* drawn in Fig 1 (`layer_forces`) are the negative gradients −∂A/∂Z_ℓ and −∂R/∂Z_ℓ (n_ℓ × N; the direction
gradient flow moves Z_ℓ). As in the paper, the pseudo-inverse is replaced there by the Tikhonov-regularised
M⁺_ρ = Mᵀ(MMᵀ + ρI)⁻¹ (→ M⁺ as ρ → 0), which keeps ∂R finite where Z^σ_ℓ loses rank.
"""

from __future__ import annotations

from typing import List

import torch

from ..objective import objective, reg_scale_factor


def augment(h: torch.Tensor, beta: float) -> torch.Tensor:
    """Z^σ = [h; β·1ᵀ] for a paper-oriented (n × N) matrix h; just h when β = 0."""
    if beta > 0:
        return torch.cat([h, beta * torch.ones(1, h.shape[1], dtype=h.dtype, device=h.device)], 0)
    return h


def representations(model, x: torch.Tensor) -> tuple[List[torch.Tensor], List[torch.Tensor]]:
    """([Z_1 … Z_L], [Z^σ_0 … Z^σ_{L−1}]) of an `fc` model on the rows of x, paper orientation, float64."""
    x = x.to(torch.float64)
    beta = float(model.beta)
    hs = model.hidden(x)
    zs = [h.pre.T for h in hs] + [model(x).T]
    zsig = [augment(x.T, beta)] + [augment(h.post.T, beta) for h in hs]
    return zs, zsig


def reformulated_loss(model, x: torch.Tensor, y: torch.Tensor, lam: float, loss: str = "mse",
                      reg_scale: str = "one", rcond: float = 1e-10) -> dict:
    """L^r at the model's own hidden representations, next to the original objective L_λ(W).

    Returns {'reformulated', 'original', 'data_loss', 'terms' (per layer), 'param_sq_norm'}; by
    Prop 1, reformulated ≤ original with equality iff every W_ℓ has no component orthogonal to
    the data (W_ℓ = Z_ℓ (Z^σ_{ℓ−1})⁺). `reg_scale` multiplies λ as in the training objective.
    """
    with torch.no_grad():
        zs, zsig = representations(model, x)
        original, dl, sq = objective(model, x.to(torch.float64), y, loss, lam, reg_scale)  # MSE in float64: y is promoted
        # ‖Z_ℓ (Z^σ_{ℓ−1})⁺‖²_F (Moore–Penrose pseudo-inverse, relative cut-off rcond)
        terms = torch.stack([(z @ torch.linalg.pinv(s, rtol=rcond)).pow(2).sum() for z, s in zip(zs, zsig)])
    return {"reformulated": float(dl + lam * reg_scale_factor(reg_scale, model.depth) * terms.sum()),
            "original": float(original), "data_loss": float(dl), "terms": terms.tolist(), "param_sq_norm": float(sq)}


def ridge_pinv(m: torch.Tensor, ridge: float) -> torch.Tensor:
    """Tikhonov pseudo-inverse Mᵀ(MMᵀ + ρI)⁻¹ (= (MᵀM + ρI)⁻¹Mᵀ); differentiable; ρ = 0 needs full row rank."""
    r, c = m.shape
    if r <= c:
        return torch.linalg.solve(m @ m.T + ridge * torch.eye(r, dtype=m.dtype, device=m.device), m).T
    return torch.linalg.solve(m.T @ m + ridge * torch.eye(c, dtype=m.dtype, device=m.device), m.T)


def layer_forces(model, x: torch.Tensor, ridge: float = 1e-6) -> list[dict]:
    """Per hidden layer ℓ = 1 … L−1 of an `fc` model: {'Z', 'attraction', 'repulsion'} (n_ℓ × N).

    'attraction' = −∂A/∂Z_ℓ = −2 Z_ℓ P Pᵀ with P = (Z^σ_{ℓ−1})⁺_ρ (N × n_{ℓ−1}) and 'repulsion' = −∂R/∂Z_ℓ (by
    autograd through σ_a, the leaky ReLU of slope a) are the forces; at a critical point of L^r in Z_ℓ,
    λ(attraction + repulsion) = 0 (C only depends on Z_L).
    """
    with torch.no_grad():
        zs, zsig = representations(model, x)
    beta = float(model.beta)
    out = []
    for l in range(model.depth - 1):  # hidden layer ℓ = l + 1: Z_ℓ = zs[l], Z^σ_{ℓ−1} = zsig[l]
        p = ridge_pinv(zsig[l], ridge)
        z = zs[l].clone().requires_grad_(True)
        (rep,) = torch.autograd.grad((zs[l + 1] @ ridge_pinv(augment(model.activation(z), beta), ridge)).pow(2).sum(), z)
        out.append({"Z": zs[l], "attraction": -(2.0 * zs[l] @ p @ p.T), "repulsion": -rep})
    return out


def project_points_and_forces(forces: dict, axis: str = "data") -> dict:
    """Project a layer's Z_ℓ and its forces (a `layer_forces` entry) onto the top two principal directions of the
    points: axis='data' → the N columns (points in R^{n_ℓ}), axis='neurons' → the n_ℓ rows (points in R^N).
    Returns {'points', 'attraction', 'repulsion'}. The PCA is uncentred: it keeps the origin fixed, so rays from the
    origin (aligned neurons) stay rays.
    """
    arrays = {"points": forces["Z"], "attraction": forces["attraction"], "repulsion": forces["repulsion"]}
    arrays = {name: (a.T if axis == "data" else a).double() for name, a in arrays.items()}
    v = torch.linalg.svd(arrays["points"], full_matrices=False)[2][:2].T
    # fix signs so that the projected points have a positive mean on each axis (deterministic plots)
    sgn = torch.where((arrays["points"] @ v).sum(0) >= 0, 1.0, -1.0)
    return {name: (a @ (v * sgn)).numpy() for name, a in arrays.items()}
