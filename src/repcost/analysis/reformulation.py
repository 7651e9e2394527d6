"""First reformulation of the L2-regularised loss (Jacot, Golikov, Hongler, Gabriel 2022, §3.1, Prop 1).

    L^r(Z_1 … Z_L) = C(Z_L) + λ Σ_ℓ ‖Z_ℓ (Z^σ_{ℓ−1})⁺‖²_F,
    Z^σ_0 = [X; β1ᵀ],  Z^σ_ℓ = [σ(Z_ℓ); β1ᵀ].

The paper writes samples as COLUMNS: Z_ℓ is n_ℓ × N. The models here take samples as rows, so
every function below returns / takes paper-oriented matrices (the transpose of `model.hidden`).
The bias row β·1ᵀ is appended only when β > 0 (with β = 0 it is a zero row, which changes
neither the pseudo-inverse norm nor the product). The augmented weight matrix of layer ℓ is
[W_ℓ, b_ℓ] acting on Z^σ_{ℓ−1}, so its squared norm is ‖W_ℓ‖² + ‖b_ℓ‖²: the λ-term of Jacot 2022
with biases regularised (`model.bias_regularised=true`).
"""

from __future__ import annotations

from typing import List

import torch

from ..objective import data_loss, reg_scale_factor


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
        s = reg_scale_factor(reg_scale, model.depth)
        yy = y if loss == "cross_entropy" else y.to(torch.float64)
        dl = data_loss(zs[-1].T, yy, loss)
        # ‖Z_ℓ (Z^σ_{ℓ−1})⁺‖²_F (Moore–Penrose pseudo-inverse, relative cut-off rcond)
        terms = torch.stack([(z @ torch.linalg.pinv(s, rtol=rcond)).pow(2).sum() for z, s in zip(zs, zsig)])
        sq = sum((p.detach().double() ** 2).sum() for p in model.regularised_params())
    return {"reformulated": float(dl + lam * s * terms.sum()), "original": float(dl + lam * s * sq),
            "data_loss": float(dl), "terms": terms.tolist(), "param_sq_norm": float(sq)}
