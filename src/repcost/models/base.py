"""The interface every model family implements (DESIGN.md: common base)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Hidden:
    """One hidden layer's representation of a batch: before and after the nonlinearity (N, n_l)."""

    pre: torch.Tensor
    post: torch.Tensor


class RepModel(nn.Module):
    """A network with depth L = number of weight matrices and a family-specific cost.

    Subclasses set `family` and `depth` and implement `forward`, `hidden`, `weight_matrices`
    and `regularised_params`; `cost` defaults to ‖θ‖²/L over the regularised parameters.
    """

    family: str = ""
    depth: int = 0

    def hidden(self, x: torch.Tensor) -> list[Hidden]:
        """Hidden representations of the rows of x, one per hidden layer, input side first."""
        raise NotImplementedError

    def weight_matrices(self) -> list[torch.Tensor]:
        """Weight matrices W_1 … W_L (out × in); stacked families add a leading member axis."""
        raise NotImplementedError

    def regularised_params(self) -> list[torch.Tensor]:
        """The parameters the objective's λ-term penalises."""
        raise NotImplementedError

    def param_sq_norm(self) -> torch.Tensor:
        """Σ‖p‖² over the regularised parameters (differentiable)."""
        return sum((p * p).sum() for p in self.regularised_params())

    def cost(self) -> torch.Tensor:
        """The family's representation-cost convention, by default C_L = ‖θ‖²/L (Ongie eq. 4)."""
        return self.param_sq_norm() / self.depth
