"""L−1 linear layers then one ReLU layer (Ongie & Willett eq. 3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ..errors import check
from ..registry import MODELS
from .base import Hidden, RepModel
from .init import gaussian_param, zeros_param


@dataclass
class LinearReLUConfig:
    name: str = "linear_relu"
    depth: int = 2  # L: W_1 … W_{L-1} linear, then a; L = 2 is the plain 2-layer ReLU net
    width: int = 100  # K: number of ReLU units
    linear_width: Optional[int] = None  # width of the linear layers W_1 … W_{L-2} (default K)
    output_bias: bool = True  # the free output offset c
    init_scale: float = 1.0  # weights ~ N(0, init_scale²·gain/fan_in)
    # > 0: biases b_k = −w_kᵀξ_k with ξ_k ~ U[−R, R]^d, so unit k's kink (hyperplane) passes through a
    # random point of that box instead of the origin — spreads the kinks over data in the box
    # (min-norm interpolants have their kinks at the data; Savarese et al. 2019 Thm 3.3). 0: b = 0.
    kink_range: float = 0.0

    def __post_init__(self):
        check(self.depth >= 2, "depth", self.depth, "an integer >= 2")
        check(self.width > 0, "width", self.width, "a positive integer")
        check(self.linear_width is None or self.linear_width > 0, "linear_width", self.linear_width,
              "a positive integer or null")
        check(self.init_scale > 0, "init_scale", self.init_scale, "a positive number")
        check(self.kink_range >= 0, "kink_range", self.kink_range, "a half-width R >= 0 (0 = zero biases)")


class LinearReLU(RepModel):
    """h(x) = aᵀ[W_{L−1}⋯W_1 x + b]₊ + c; regularised: W_i and a (biases free); C_L = ‖θ‖²/L."""

    family = "linear_relu"

    def __init__(self, cfg: LinearReLUConfig, d_in: int, d_out: int, gen: torch.Generator):
        super().__init__()
        self.depth = cfg.depth
        m = cfg.linear_width or cfg.width
        dims = [d_in] + [m] * (cfg.depth - 2) + [cfg.width]
        self.linear = nn.ParameterList(
            gaussian_param((dims[i + 1], dims[i]), dims[i], 1.0, cfg.init_scale, gen)
            for i in range(cfg.depth - 1))
        self.b = zeros_param((cfg.width,))
        self.a = gaussian_param((d_out, cfg.width), cfg.width, 2.0, cfg.init_scale, gen)
        self.c = zeros_param((d_out,)) if cfg.output_bias else None
        if cfg.kink_range > 0:  # drawn last, so kink_range = 0 leaves every other draw unchanged
            xi = (2 * torch.rand(cfg.width, d_in, generator=gen, dtype=torch.float64) - 1) * cfg.kink_range
            with torch.no_grad():
                self.b.copy_(-(xi * self.effective_matrix()).sum(dim=1))

    def _inner(self, x: torch.Tensor) -> list[torch.Tensor]:
        hs, h = [], x
        for W in self.linear:
            h = h @ W.T
            hs.append(h)
        hs[-1] = hs[-1] + self.b
        return hs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self._inner(x)[-1]) @ self.a.T
        return out + self.c if self.c is not None else out

    def hidden(self, x: torch.Tensor) -> list[Hidden]:
        hs = self._inner(x)
        return [Hidden(h, h) for h in hs[:-1]] + [Hidden(hs[-1], torch.relu(hs[-1]))]

    def weight_matrices(self) -> list[torch.Tensor]:
        return list(self.linear) + [self.a]

    def effective_matrix(self) -> torch.Tensor:
        """W = W_{L−1}⋯W_1, the inner matrix of the equivalent 2-layer net (Ongie §3)."""
        W = self.linear[0]
        for Wi in list(self.linear)[1:]:
            W = Wi @ W
        return W

    def regularised_params(self) -> list[torch.Tensor]:
        return list(self.linear) + [self.a]


@MODELS.register("linear_relu", LinearReLUConfig)
def build_linear_relu(cfg: LinearReLUConfig, d_in: int, d_out: int, gen: torch.Generator) -> LinearReLU:
    """Ongie & Willett's net: L−1 linear layers then a ReLU layer of width K (eq. 3)."""
    return LinearReLU(cfg, d_in, d_out, gen)
