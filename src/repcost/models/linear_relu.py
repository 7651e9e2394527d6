"""L−1 linear layers then one ReLU layer (Ongie & Willett eq. 3)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import nn

from ..errors import ConfigError, check
from ..registry import MODELS
from .base import AffineChain, Hidden, RepModel, Structure, UnitNorms, chain_weights, gaussian_param


@dataclass
class LinearReLUConfig:
    name: str = "linear_relu"
    depth: int = 2  # L: W_1 … W_{L-1} linear, then a; L = 2 is the plain 2-layer ReLU net
    width: int = 100  # K: number of ReLU units
    linear_width: int | None = None  # width of the linear layers W_1 … W_{L-2} (default K)
    output_bias: bool = True  # the free output offset c
    init_scale: float = 1.0  # weights ~ N(0, init_scale²·gain/fan_in)
    # > 0: biases b_k = −w_kᵀξ_k with ξ_k ~ U[−R, R]^d, so unit k's kink (hyperplane) passes through a
    # random point of that box instead of the origin — spreads the kinks over data in the box
    # (min-norm interpolants have their kinks at the data; Savarese et al. 2019 Thm 3.3). 0: b = 0.
    kink_range: float = 0.0
    # true: ξ_k uniform over the bounding box of the training inputs instead (repcost-train passes them;
    # every gap between 1-D data points then starts with kinks in it, whatever the data's scale and place)
    kinks_over_data: bool = False
    # true (1-D inputs): ξ_k in a gap between consecutive training points drawn uniformly among the gaps,
    # then uniform within it, so every gap starts with about width/(N−1) kinks however narrow it is (over
    # the data's range, a gap of 1/8 the mean spacing starts with about width/(8N))
    kinks_per_gap: bool = False

    def __post_init__(self):
        check(self.depth >= 2, "depth", self.depth, "an integer >= 2")
        check(self.width > 0, "width", self.width, "a positive integer")
        check(self.linear_width is None or self.linear_width > 0, "linear_width", self.linear_width,
              "a positive integer or null")
        check(self.init_scale > 0, "init_scale", self.init_scale, "a positive number")
        check(self.kink_range >= 0, "kink_range", self.kink_range, "a half-width R >= 0 (0 = zero biases)")
        check(not ((self.kinks_over_data or self.kinks_per_gap) and self.kink_range > 0), "kink_range",
              self.kink_range, "0 with kinks_over_data or kinks_per_gap (the kinks are placed over the data instead)")
        check(not (self.kinks_over_data and self.kinks_per_gap), "kinks_per_gap", self.kinks_per_gap,
              "false with kinks_over_data=true (one placement of the kinks)")

    def param_count(self, d_in: int, d_out: int) -> int:
        """Parameters of the net LinearReLU builds: W_1 … W_{L−1}, b, a and (output_bias) c."""
        weights = chain_weights(d_in, self.linear_width or self.width, self.depth - 2, self.width)
        return weights + self.width * (1 + d_out) + (d_out if self.output_bias else 0)


@MODELS.register("linear_relu", LinearReLUConfig)
class LinearReLU(RepModel):
    """h(x) = aᵀ[W_{L−1}⋯W_1 x + b]₊ + c; regularised: W_i and a (biases free); C_L = ‖θ‖²/L."""

    family = "linear_relu"
    structure = Structure(chain=True, layer_rescaling=True, unit_rescaling=True, positively_homogeneous=True, biases="free")

    def __init__(self, cfg: LinearReLUConfig, d_in: int, d_out: int, gen: torch.Generator):
        super().__init__()
        self.depth = cfg.depth
        m = cfg.linear_width or cfg.width
        dims = [d_in] + [m] * (cfg.depth - 2) + [cfg.width]
        self.linear = nn.ParameterList(gaussian_param((dims[i + 1], dims[i]), 1.0, cfg.init_scale, gen)
                                       for i in range(cfg.depth - 1))
        self.b = nn.Parameter(torch.zeros(cfg.width, dtype=torch.float64))
        self.a = gaussian_param((d_out, cfg.width), 2.0, cfg.init_scale, gen)
        self.c = nn.Parameter(torch.zeros(d_out, dtype=torch.float64)) if cfg.output_bias else None
        self.kinks_over_data, self.kinks_per_gap = cfg.kinks_over_data, cfg.kinks_per_gap
        if cfg.kink_range > 0:  # drawn last, so kink_range = 0 leaves every other draw unchanged
            xi = (2 * torch.rand(cfg.width, d_in, generator=gen, dtype=torch.float64) - 1) * cfg.kink_range
            self._kinks_through(xi)

    def _kinks_through(self, xi: torch.Tensor) -> None:
        """b_k = −w_kᵀξ_k: unit k's kink (hyperplane) passes through the point ξ_k."""
        with torch.no_grad():
            self.b.copy_(-(xi.to(self.b.dtype) * self.effective_matrix()).sum(dim=1))

    def init_from_data(self, x_train: torch.Tensor, gen: torch.Generator) -> None:
        """kinks_over_data: ξ_k uniform over the training inputs' bounding box; kinks_per_gap: in a random gap
        between consecutive points, uniform within it (both drawn after every other draw)."""
        if not (self.kinks_over_data or self.kinks_per_gap):
            return
        x = x_train.detach().to("cpu", torch.float64)
        K = self.b.shape[0]
        if self.kinks_over_data:
            lo, hi = x.min(dim=0).values, x.max(dim=0).values
        else:
            if x.shape[1] != 1:
                raise ConfigError("model.kinks_per_gap", True, f"false for {x.shape[1]}-D inputs (gaps are 1-D)")
            pts = torch.unique(x[:, 0])  # sorted
            if pts.numel() < 2:
                raise ConfigError("model.kinks_per_gap", True, "false with fewer than 2 distinct training inputs")
            gap = torch.randint(pts.numel() - 1, (K,), generator=gen)
            lo, hi = pts[gap, None], pts[gap + 1, None]  # each kink's gap
        u = torch.rand(K, x.shape[1], generator=gen, dtype=torch.float64)
        self._kinks_through(lo + u * (hi - lo))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.hidden(x)[-1].post @ self.a.T
        return out + self.c if self.c is not None else out

    def hidden(self, x: torch.Tensor) -> list[Hidden]:
        out, h = [], x
        for W in self.linear:
            h = h @ W.T
            out.append(Hidden(h, h))
        h = h + self.b  # the ReLU layer's pre-activation
        out[-1] = Hidden(h, torch.relu(h))
        return out

    def weight_matrices(self) -> list[torch.Tensor]:
        return list(self.linear) + [self.a]

    def effective_matrix(self) -> torch.Tensor:
        """W = W_{L−1}⋯W_1, the inner matrix of the equivalent 2-layer net (Ongie §3)."""
        return functools.reduce(lambda W, Wi: Wi @ W, list(self.linear)[1:], self.linear[0])

    def weight_names(self) -> list[str]:
        return [f"W{i}" for i in range(1, self.depth)] + ["a"]

    def derived_matrices(self) -> dict[str, torch.Tensor]:
        return {"W_eff": self.effective_matrix()}

    def unit_norms(self) -> list[UnitNorms]:
        """Only the ReLU layer (ℓ = L−1) is homogeneous: row k of W_{L−1} (not of the effective matrix: the
        per-unit rescaling acts on W_{L−1}'s row, b_k and a's column k) against column k of a; b is free."""
        return [UnitNorms(self.depth - 1, (self.linear[-1] ** 2).sum(1), (self.a ** 2).sum(0))]

    def rescale_units(self, layer: int, c: torch.Tensor) -> None:
        """Unit k of the ReLU layer: row k of W_{L−1} and b_k by c_k, column k of a by 1/c_k."""
        with torch.no_grad():
            self.linear[-1].mul_(c.to(self.linear[-1].dtype)[:, None])
            self.b.mul_(c.to(self.b.dtype))
            self.a.div_(c.to(self.a.dtype)[None, :])

    def linear_pairs(self) -> list[tuple[int, torch.Tensor, torch.Tensor, bool]]:
        """Linear-linear pairs take any invertible G (full matrices); the last pair (W_{L−1}, a) straddles the
        ReLU, where only positive diagonal rescalings act (diagonals only)."""
        Ws = list(self.linear) + [self.a]
        return [(ell, Ws[ell - 1], Ws[ell], ell == self.depth - 1) for ell in range(1, self.depth)]

    def affine_chain(self) -> AffineChain:
        c = self.c if self.c is not None else torch.zeros(self.a.shape[0], dtype=self.a.dtype, device=self.a.device)
        return AffineChain([self.effective_matrix(), self.a], [self.b, c], 0.0)

