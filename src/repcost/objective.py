"""The regularised objective (docs/ARCHITECTURE.md, Conventions): data loss + λ·s·Σ‖p‖² over the regularised params."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:  # a leaf: every layer imports this module, it imports none of them
    from .models.base import RepModel


def reg_scale_factor(reg_scale: str, depth: int) -> float:
    """s in λ·s·Σ‖p‖²: 1 (Jacot 2022), 1/L (Jacot 2023, Ongie C_L) or 1/2 (Savarese C(θ))."""
    return {"one": 1.0, "per_depth": 1.0 / depth, "half": 0.5}[reg_scale]


def data_loss(out: torch.Tensor, y: torch.Tensor, loss: str) -> torch.Tensor:
    """MSE = (1/N)Σ_i‖f(x_i) − y_i‖² (sum over outputs, mean over samples), or mean cross-entropy."""
    if loss == "mse":
        return ((out - y) ** 2).sum() / out.shape[0]
    return F.cross_entropy(out, y)


def objective(model: "RepModel", x: torch.Tensor, y: torch.Tensor, loss: str, lam: float,
              reg_scale: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(objective, data loss, Σ‖p‖²) at the model's current parameters."""
    dl = data_loss(model(x), y, loss)
    sq = model.param_sq_norm()
    return dl + lam * reg_scale_factor(reg_scale, model.depth) * sq, dl, sq


def training_targets(data, y: torch.Tensor, loss: str) -> torch.Tensor:
    """Class indices become one-hot rows for MSE on a classification dataset."""
    if loss == "mse" and data.task == "classification":
        return torch.nn.functional.one_hot(y, data.n_classes).to(data.x_train.dtype)
    return y
