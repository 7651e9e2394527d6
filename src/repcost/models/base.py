"""The model protocol every family implements (docs/protocol.md).

A model describes its structure and nothing else: hidden representations, weight matrices and
their names, the activation, what it declares it has (`Structure`: a chain of affine maps, a
per-unit rescaling symmetry, positive homogeneity, biases), and the per-layer and per-unit
squared norms that go with that structure. Algorithms on models (rebalancing, unit insertion,
duality gaps, costs, certificates) live in `repcost.analysis`; an analysis whose assumption a
model does not declare reports "not applicable", never a number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


def gaussian_param(shape, gain: float, scale: float, gen: torch.Generator) -> nn.Parameter:
    """A float64 weight ~ N(0, scale²·gain/fan_in), fan_in = shape[-1] (He init for gain 2), drawn from `gen`."""
    return nn.Parameter(torch.randn(*shape, generator=gen, dtype=torch.float64) * (scale * math.sqrt(gain / shape[-1])))


def chain_weights(d_in: int, width: int, hidden: int, d_out: int) -> int:
    """Entries of the weight matrices of a chain d_in → width (`hidden` layers of it) → d_out, in closed form (a
    config's parameter count stays cheap at any depth)."""
    return d_in * d_out if hidden == 0 else d_in * width + (hidden - 1) * width * width + width * d_out


@dataclass
class Hidden:
    """One hidden layer's representation of a batch: before and after the nonlinearity (N, n_l)."""

    pre: torch.Tensor
    post: torch.Tensor


@dataclass
class UnitNorms:
    """Hidden layer `layer`'s units: squared norms of what rescaling a unit by c multiplies by c (incoming,
    with the unit's bias iff biases are regularised) and by 1/c (outgoing). Equal at a critical point of
    the weight-decay objective when the activation is positively homogeneous (Jacot 2023 Remark 6)."""

    layer: int
    incoming: torch.Tensor  # (n_units,)
    outgoing: torch.Tensor  # (n_units,)


@dataclass(frozen=True)
class Structure:
    """What a family declares it has; analyses read these flags, never a family name.

    chain: `affine_chain()` gives the network as x ↦ W_L σ(… σ(W_1 x + b_1) …) + b_L.
    layer_rescaling: the net is layered, every path from input to output passing once through each of
      `weight_matrices()` and the activation between them (a chain, or blocks of chains side by side), so
      scaling layer ℓ's weights by c_ℓ (and its bias by c_1⋯c_ℓ) with Π_ℓ c_ℓ = 1 keeps the function
      (`layer_sq_norms()`: Jacot 2023 Prop 12's layer balance) and J f(x) = W_L D_{L−1}(x) ⋯ D_1(x) W_1
      (Jacot 2023 Prop 3's bound). Not a net with skip connections.
    unit_rescaling: scaling a hidden unit's incoming parameters by c > 0 and its outgoing ones by 1/c
      keeps the function (`unit_norms()`, `rescale_units()`): the per-unit balance of a critical point.
    positively_homogeneous: σ(cz) = cσ(z) for c > 0.
    biases: "none", "free" (not in the λ-term) or "regularised".
    """

    chain: bool = False
    layer_rescaling: bool = False
    unit_rescaling: bool = False
    positively_homogeneous: bool = True
    biases: str = "none"


@dataclass
class AffineChain:
    """The network as x ↦ W_L σ(… σ(W_1 x + b_1) …) + b_L with σ the leaky ReLU of slope `slope`."""

    weights: list[torch.Tensor]
    biases: list[torch.Tensor] | None
    slope: float = 0.0


class RepModel(nn.Module):
    """A network with depth L = number of weight matrices and a family-specific cost.

    Subclasses set `family`, `depth` and `structure` and implement `forward`, `hidden` and
    `weight_matrices`; `regularised_params`, `activation`, `unit_norms`, `rescale_units` and
    `layer_sq_norms` default to a ReLU chain of weight matrices with the biases of `bias_vectors()` (none by
    default; in the λ-term iff `structure.biases` is "regularised") and are read only where `structure`
    declares the symmetry they describe.
    """

    family: str = ""
    depth: int = 0
    structure: Structure = Structure()

    # -- what every family implements ---------------------------------------------------------
    def hidden(self, x: torch.Tensor) -> list[Hidden]:
        """Hidden representations of the rows of x, one per hidden layer, input side first."""
        raise NotImplementedError

    def weight_matrices(self) -> list[torch.Tensor]:
        """Weight matrices W_1 … W_L (out × in); stacked families add a leading member axis."""
        raise NotImplementedError

    def bias_vectors(self) -> list[torch.Tensor]:
        """A chain's bias vectors b_1 … b_L, one per weight matrix, as stored (none by default)."""
        return []

    def _penalised_biases(self) -> list[torch.Tensor]:
        return self.bias_vectors() if self.structure.biases == "regularised" else []

    def regularised_params(self) -> list[torch.Tensor]:
        """The parameters the objective's λ-term penalises: the weight matrices, and the biases if regularised."""
        return self.weight_matrices() + self._penalised_biases()

    def activation(self, z: torch.Tensor) -> torch.Tensor:
        """The hidden nonlinearity σ (applied elementwise)."""
        return torch.relu(z)

    def init_from_data(self, x_train: torch.Tensor, gen: torch.Generator) -> None:
        """Data-dependent initialisation, after the builder's draws from the same generator (none by default)."""

    # -- costs ---------------------------------------------------------------------------------
    def param_sq_norm(self) -> torch.Tensor:
        """Σ‖p‖² over the regularised parameters (differentiable)."""
        return sum((p * p).sum() for p in self.regularised_params())

    def cost(self) -> torch.Tensor:
        """The family's representation-cost convention, by default C_L = ‖θ‖²/L (Ongie eq. 4)."""
        return self.param_sq_norm() / self.depth

    # -- structure the analyses read -----------------------------------------------------------
    def weight_names(self) -> list[str]:
        """Names of `weight_matrices()` in analysis outputs (W1 … WL by default)."""
        return [f"W{i}" for i in range(1, len(self.weight_matrices()) + 1)]

    def derived_matrices(self) -> dict[str, torch.Tensor]:
        """Further matrices whose spectra matter (e.g. an effective product of linear layers)."""
        return {}

    def layer_sq_norms(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer ℓ = 1 … L: (‖W_ℓ‖²_F, ‖b_ℓ‖² of its regularised bias, 0 if none) — Jacot 2023 Prop 12's terms."""
        bs = self._penalised_biases()
        return [((W * W).sum(), (bs[i] ** 2).sum() if bs else torch.zeros(()))
                for i, W in enumerate(self.weight_matrices())]

    def unit_norms(self) -> list[UnitNorms]:
        """Per hidden layer, every unit's incoming (row of W_ℓ, its bias if regularised) and outgoing (column of
        W_{ℓ+1}) squared norms. Stacked weights (blocks side by side, W_ℓ of shape (k, n_ℓ, n_{ℓ−1})) number block
        i's unit j as i·n_ℓ + j, the order of `hidden()`; a plain W_{ℓ+1} after them has a column per unit."""
        Ws, bs = self.weight_matrices(), self._penalised_biases()
        return [UnitNorms(ell, ((Ws[ell - 1] ** 2).sum(-1) + (bs[ell - 1] ** 2 if bs else 0)).reshape(-1),
                          (Ws[ell] ** 2).sum(-2).reshape(-1)) for ell in range(1, len(Ws))]

    def rescale_units(self, layer: int, c: torch.Tensor) -> None:
        """Multiply what `unit_norms()` counts as hidden layer `layer`'s unit k's incoming parameters (its
        bias too, regularised or not) by c_k > 0 and its outgoing ones by 1/c_k, in place: with a positively
        homogeneous σ the network function is unchanged. Layers of matrices (or stacked blocks, as `unit_norms`)
        and their biases by default."""
        Ws, bs = self.weight_matrices(), self.bias_vectors()
        w_in, w_out = Ws[layer - 1], Ws[layer]
        with torch.no_grad():
            if bs:
                bs[layer - 1].mul_(c.to(bs[layer - 1].dtype))
            w_in.mul_(c.to(w_in.dtype).reshape(*w_in.shape[:-1], 1))
            w_out.div_(c.to(w_out.dtype).reshape(*w_out.shape[:-2], 1, w_out.shape[-1]))

    def linear_pairs(self) -> list[tuple[int, torch.Tensor, torch.Tensor, bool]]:
        """(ℓ, W_ℓ, W_{ℓ+1}, diag_only) for consecutive layers joined by a linear (or only diagonally
        rescalable) map: deep-linear balancedness W_ℓW_ℓᵀ = W_{ℓ+1}ᵀW_{ℓ+1}. None by default."""
        return []

    def affine_chain(self) -> AffineChain:
        """The function as a chain of affine maps and leaky ReLUs (used for exact 1-D analysis)."""
        raise NotImplementedError(f"the {self.family or type(self).__name__} family is not a chain of affine maps "
                                  "and leaky ReLUs")


