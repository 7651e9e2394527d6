"""Fully connected homogeneous network (Jacot 2022 §2, Jacot 2023 §2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import check
from ..registry import MODELS
from .base import AffineChain, Hidden, RepModel, Structure, gaussian_param


MAX_DEPTH = 100_000  # a deeper chain is a typo, not an experiment (and its width list would not fit in memory)


@dataclass
class FCConfig:
    name: str = "fc"
    depth: int = 3  # L = number of weight matrices
    width: Any = 50  # hidden width: one int, or a list of L-1 ints
    slope: float = 0.0  # σ_a: x ↦ x for x ≥ 0, a·x otherwise (0 = ReLU)
    beta: float = 1.0  # bias amount β: α_ℓ = W_ℓ α^σ_{ℓ-1} + β b_ℓ (0 = no bias)
    bias_regularised: bool = True  # whether ‖b_ℓ‖² enters the λ-term
    init_scale: float = 1.0  # weights ~ N(0, init_scale²·2/((1+a²)·fan_in))

    def __post_init__(self):
        check(self.depth >= 2, "depth", self.depth, "an integer >= 2")
        check(self.depth <= MAX_DEPTH, "depth", self.depth, f"an integer <= {MAX_DEPTH}")
        widths = self.widths()
        check(len(widths) == self.depth - 1, "width", self.width,
              f"one positive int or a list of depth-1 = {self.depth - 1} positive ints")
        check(all(isinstance(w, int) and w > 0 for w in widths), "width", self.width, "positive integers")
        check(-1.0 < self.slope < 1.0, "slope", self.slope, "a leaky-ReLU slope in (-1, 1)")
        check(self.beta >= 0, "beta", self.beta, "a bias amount >= 0")
        check(self.init_scale > 0, "init_scale", self.init_scale, "a positive number")

    def widths(self) -> list:
        """Hidden widths n_1 … n_{L-1}."""
        return list(self.width) if hasattr(self.width, "__iter__") else [self.width] * (self.depth - 1)

    def param_count(self, d_in: int, d_out: int) -> int:
        """Parameters of the net FC builds: every W_ℓ, and every b_ℓ when β > 0."""
        dims = [d_in, *self.widths(), d_out]
        return sum(a * b for a, b in zip(dims, dims[1:])) + (sum(dims[1:]) if self.beta > 0 else 0)


@MODELS.register("fc", FCConfig)
class FC(RepModel):
    """f(x) = W_L σ_a(… σ_a(W_1 x + β b_1) …) + β b_L with σ_a the leaky ReLU of slope a."""

    family = "fc"

    def __init__(self, cfg: FCConfig, d_in: int, d_out: int, gen: torch.Generator):
        super().__init__()
        self.depth, self.slope, self.beta = cfg.depth, cfg.slope, cfg.beta
        biases = "none" if cfg.beta == 0 else ("regularised" if cfg.bias_regularised else "free")
        self.structure = Structure(chain=True, layer_rescaling=True, unit_rescaling=True, biases=biases)
        dims = [d_in, *cfg.widths(), d_out]
        gain = 2.0 / (1.0 + cfg.slope**2)
        self.weights = nn.ParameterList(
            gaussian_param((dims[i + 1], dims[i]), 1.0 if i == 0 else gain, cfg.init_scale, gen)
            for i in range(cfg.depth))
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(dims[i + 1], dtype=torch.float64))
                                       for i in range(cfg.depth) if cfg.beta > 0)

    def activation(self, z: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(z, self.slope) if self.slope else torch.relu(z)

    def _layer(self, i: int, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.weights[i], self.beta * self.biases[i] if self.beta else None)  # one addmm: h Wᵀ + β b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._layer(self.depth - 1, self.hidden(x)[-1].post)

    def hidden(self, x: torch.Tensor) -> list[Hidden]:
        out, h = [], x
        for i in range(self.depth - 1):
            z = self._layer(i, h)
            h = self.activation(z)
            out.append(Hidden(z, h))
        return out

    def weight_matrices(self) -> list[torch.Tensor]:
        return list(self.weights)

    def bias_vectors(self) -> list[torch.Tensor]:
        """Bias vectors b_1 … b_L as stored (the forward pass multiplies them by β, which scales like b_ℓ in the
        penalty and the rescalings); empty if β = 0."""
        return list(self.biases)

    def affine_chain(self) -> AffineChain:
        bs = [self.beta * b for b in self.biases] if self.beta > 0 else None
        return AffineChain(list(self.weights), bs, float(self.slope))

