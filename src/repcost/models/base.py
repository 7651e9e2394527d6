"""The model protocol every family implements (docs/ARCHITECTURE.md, "The model protocol").

Analyses ask the model, never its family name: hidden representations, weight matrices and
their names, the activation and whether it is positively homogeneous, the per-layer and
per-unit squared norms that weight decay balances at a critical point, and family-specific
costs. A family overrides what differs from the defaults below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import nn


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


@dataclass
class AffineChain:
    """The network as x ↦ W_L σ(… σ(W_1 x + b_1) …) + b_L with σ the leaky ReLU of slope `slope`."""

    weights: list[torch.Tensor]
    biases: Optional[list[torch.Tensor]]
    slope: float = 0.0


class RepModel(nn.Module):
    """A network with depth L = number of weight matrices and a family-specific cost.

    Subclasses set `family` and `depth` and implement `forward`, `hidden`, `weight_matrices`,
    `regularised_params` and `activation`; the rest has defaults that hold for a plain chain
    of weight matrices without regularised biases.
    """

    family: str = ""
    depth: int = 0
    positively_homogeneous: bool = True  # σ(cz) = cσ(z) for c > 0 (ReLU, leaky ReLU)

    # -- what every family implements ---------------------------------------------------------
    def hidden(self, x: torch.Tensor) -> list[Hidden]:
        """Hidden representations of the rows of x, one per hidden layer, input side first."""
        raise NotImplementedError

    def weight_matrices(self) -> list[torch.Tensor]:
        """Weight matrices W_1 … W_L (out × in); stacked families add a leading member axis."""
        raise NotImplementedError

    def regularised_params(self) -> list[torch.Tensor]:
        """The parameters the objective's λ-term penalises."""
        raise NotImplementedError

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

    def family_costs(self, x_train: torch.Tensor, y_train: torch.Tensor) -> tuple[dict[str, float], dict[str, Any]]:
        """Costs and bounds the family's papers define (scalars, arrays); none by default."""
        return {}, {}

    # -- structure the analyses read -----------------------------------------------------------
    def weight_names(self) -> list[str]:
        """Names of `weight_matrices()` in analysis outputs (W1 … WL by default)."""
        return [f"W{i}" for i in range(1, len(self.weight_matrices()) + 1)]

    def derived_matrices(self) -> dict[str, torch.Tensor]:
        """Further matrices whose spectra matter (e.g. an effective product of linear layers)."""
        return {}

    def layer_sq_norms(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer ℓ = 1 … L: (‖W_ℓ‖²_F, ‖b_ℓ‖² of its regularised bias, 0 if none) — Jacot 2023 Prop 12's terms."""
        zero = torch.zeros(())
        return [((W * W).sum(), zero) for W in self.weight_matrices()]

    def unit_norms(self) -> list[UnitNorms]:
        """Per homogeneous hidden layer, every unit's incoming and outgoing squared norms (chain of matrices)."""
        Ws = self.weight_matrices()
        return [UnitNorms(ell, (Ws[ell - 1] ** 2).sum(1), (Ws[ell] ** 2).sum(0)) for ell in range(1, len(Ws))]

    def rescale_units(self, layer: int, c: torch.Tensor) -> None:
        """Multiply what `unit_norms()` counts as hidden layer `layer`'s unit k's incoming parameters (its
        bias too, regularised or not) by c_k > 0 and its outgoing ones by 1/c_k, in place: with a positively
        homogeneous σ the network function is unchanged. A chain of matrices by default."""
        Ws = self.weight_matrices()
        with torch.no_grad():
            Ws[layer - 1].mul_(c.to(Ws[layer - 1].dtype)[:, None])
            Ws[layer].div_(c.to(Ws[layer].dtype)[None, :])

    def rebalance(self, max_sweeps: int = 1000, tol: float = 1e-12) -> tuple[float, float]:
        """Move to the point of least penalty on the orbit of per-unit rescalings (the function is unchanged).

        Along unit k's rescaling the penalty is c²·in_k + out_k/c², least at c⁴ = out_k/in_k, where
        in_k = out_k (Jacot 2023 Remark 6): the balance a critical point has. Neighbouring layers share a
        matrix, so one sweep's scales (all layers, from the norms at the sweep's start) leave the next
        layer slightly off; sweeps repeat until no unit moves by more than `tol` (a Jacobi iteration on a
        convex function of the log-scales; cf. Stock et al. 2019, "Equi-normalization of neural
        networks", which updates layer by layer). Returns the certificate's unit gap (the largest
        layer's Σ_k|in_k − out_k| / Σ_k max(in_k, out_k)) before and after.
        """
        if not self.positively_homogeneous:
            raise ValueError(f"rebalancing needs a positively homogeneous activation ({self.family} is not)")
        mro = type(self).__mro__
        defines = lambda name: next(c for c in mro if name in vars(c))  # noqa: E731
        if defines("unit_norms") is not defines("rescale_units") and issubclass(defines("unit_norms"),
                                                                                defines("rescale_units")):
            raise NotImplementedError(f"{type(self).__name__} defines its own unit_norms but no rescale_units "
                                      "to go with them")
        before = _max_unit_gap(self.unit_norms())
        with torch.no_grad():
            for _ in range(max_sweeps):
                moved = 0.0
                for u in self.unit_norms():
                    inc, out = u.incoming.detach().double(), u.outgoing.detach().double()
                    # a unit that weight decay drove to ~0 on either side is left as it is: with a free
                    # bias its orbit's infimum is at c -> ∞ (a constant a·relu(b) costs nothing in the
                    # limit), and c⁴ = out/in would overflow
                    floor = _NEGLIGIBLE * float(torch.maximum(inc, out).sum())
                    live = (inc > floor) & (out > floor)
                    c = torch.where(live, (out / inc.where(live, torch.ones_like(inc))) ** 0.25,
                                    torch.ones_like(inc))
                    moved = max(moved, float((c.log().abs()).max()) if c.numel() else 0.0)
                    self.rescale_units(u.layer, c)
                if moved <= tol:
                    break
        return before, _max_unit_gap(self.unit_norms())

    def global_gap(self, x: torch.Tensor, y: torch.Tensor, loss: str, rho: float) -> dict[str, float]:
        """A bound on how far the model is above the global minimum of loss + ρΣ‖p‖², where the family has a
        convex reformulation whose dual it can evaluate (the certificate's `duality_gap*`); none by default."""
        return {}

    def insert_units(self, x: torch.Tensor, y: torch.Tensor, n: int, rho: float) -> list[Any]:
        """Re-place up to n idle units where a new unit lowers loss + ρΣ‖p‖² most (PhaseConfig.insert_units;
        MSE loss); returns what was inserted, one entry per unit. Families without it raise
        NotImplementedError."""
        raise NotImplementedError(f"the {self.family or type(self).__name__} family has no unit insertion")

    def linear_pairs(self) -> list[tuple[int, torch.Tensor, torch.Tensor, bool]]:
        """(ℓ, W_ℓ, W_{ℓ+1}, diag_only) for consecutive layers joined by a linear (or only diagonally
        rescalable) map: deep-linear balancedness W_ℓW_ℓᵀ = W_{ℓ+1}ᵀW_{ℓ+1}. None by default."""
        return []

    def extra_balance_gaps(self) -> dict[str, Any]:
        """Further balancedness gaps the family's theory gives (name -> array of gaps in [0, 1])."""
        return {}

    def affine_chain(self) -> AffineChain:
        """The function as a chain of affine maps and leaky ReLUs (used for exact 1-D analysis)."""
        raise NotImplementedError(f"the {self.family or type(self).__name__} family is not a chain of affine maps "
                                  "and leaky ReLUs")


_NEGLIGIBLE = 1e-12  # a unit side below this fraction of its layer's mass is not rescaled (rebalance)


def _max_unit_gap(units: list[UnitNorms]) -> float:
    """The certificate's unit gap: the largest layer's mass-weighted gap (0 without hidden units)."""
    from ..analysis.certificate import weighted_gap

    return max((weighted_gap(u.incoming.detach(), u.outgoing.detach()) for u in units), default=0.0)
