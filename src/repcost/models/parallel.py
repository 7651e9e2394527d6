"""k parallel bias-free ReLU sub-networks of depth L−1 summed by α (Savarese App. C, eq. 40–42)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import check
from ..registry import MODELS
from .base import Hidden, RepModel, Structure, chain_weights, gaussian_param


@dataclass
class ParallelConfig:
    name: str = "parallel"
    depth: int = 3  # L: each sub-network has L-1 weight matrices, then α
    n_subnets: int = 20  # k: number of parallel sub-networks
    width: int = 10  # m: width of the sub-networks' hidden layers
    init_scale: float = 1.0  # weights ~ N(0, init_scale²·2/fan_in)

    def __post_init__(self):
        check(self.depth >= 2, "depth", self.depth, "an integer >= 2")
        check(self.n_subnets > 0, "n_subnets", self.n_subnets, "a positive integer")
        check(self.width > 0, "width", self.width, "a positive integer")
        check(self.init_scale > 0, "init_scale", self.init_scale, "a positive number")

    def param_count(self, d_in: int, d_out: int) -> int:
        """Parameters of the net Parallel builds: k sub-networks d_in → m … m → 1, then α (d_out × k)."""
        return self.n_subnets * (chain_weights(d_in, self.width, self.depth - 2, 1) + d_out)


@MODELS.register("parallel", ParallelConfig)
class Parallel(RepModel):
    """h(x) = Σ_i α_i v(W_i, x), v = ReLU∘W_i^{(L−1)}∘…∘ReLU∘W_i^{(1)}; stacked (k, out, in) weights."""

    family = "parallel"
    structure = Structure(layer_rescaling=True, unit_rescaling=True, positively_homogeneous=True, biases="none")

    def __init__(self, cfg: ParallelConfig, d_in: int, d_out: int, gen: torch.Generator):
        super().__init__()
        self.depth, k = cfg.depth, cfg.n_subnets
        dims = [d_in] + [cfg.width] * (cfg.depth - 2) + [1]
        self.sub = nn.ParameterList(
            gaussian_param((k, dims[i + 1], dims[i]), 1.0 if i == 0 else 2.0, cfg.init_scale, gen)
            for i in range(cfg.depth - 1))
        self.alpha = gaussian_param((d_out, k), 2.0, cfg.init_scale, gen)

    def _subnet_layers(self, x: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(pre, post) activations of every sub-network layer, each (k, N, n_l)."""
        out = []
        for i, W in enumerate(self.sub):
            h = torch.einsum("nd,kmd->knm", x, W) if i == 0 else torch.einsum("knm,kpm->knp", out[-1][1], W)
            out.append((h, torch.relu(h)))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = self._subnet_layers(x)[-1][1][..., 0]  # (k, N) sub-network outputs
        return torch.einsum("kn,ok->no", v, self.alpha)

    def hidden(self, x: torch.Tensor) -> list[Hidden]:
        flat = lambda t: t.permute(1, 0, 2).reshape(t.shape[1], -1)  # (N, k·n_l)
        return [Hidden(flat(p), flat(q)) for p, q in self._subnet_layers(x)]

    def weight_matrices(self) -> list[torch.Tensor]:
        return list(self.sub) + [self.alpha]

    def weight_names(self) -> list[str]:
        return [f"W{i}" for i in range(1, self.depth)] + ["alpha"]
