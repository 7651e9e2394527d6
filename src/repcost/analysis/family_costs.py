"""Costs and balance statements that one family's papers define, registered per family.

The model protocol holds structure only; what Ongie & Willett (2022) state for L−1 linear layers
then a ReLU layer, or Savarese et al. (2019, App. C) for parallel sub-networks, is computed here from
the model's tensors. A plugin family registers its own with `register_family_costs` /
`register_family_gaps`; a family with none gets no `costs` analysis ("not applicable").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from . import costs as C
from .arrays import as_f64
from .relu_1d import deep_relu_net_1d_function, spline_min_cost

CostFn = Callable[[Any, torch.Tensor, torch.Tensor], tuple[dict[str, float], dict[str, Any]]]
GapFn = Callable[[Any], dict[str, np.ndarray]]
FAMILY_COSTS: dict[str, CostFn] = {}
FAMILY_GAPS: dict[str, GapFn] = {}


def register_family_costs(family: str, fn: CostFn) -> None:
    """`fn(model, x_train, y_train) -> (scalars, arrays)`: the family's costs and bounds (the `costs` analysis)."""
    FAMILY_COSTS[family] = fn


def register_family_gaps(family: str, fn: GapFn) -> None:
    """`fn(model) -> {name: gaps in [0, 1]}`: balance statements of the family's theory (reported, unweighted)."""
    FAMILY_GAPS[family] = fn


def family_gaps(model) -> dict[str, np.ndarray]:
    """The registered balance gaps of the model's family ({} if none)."""
    return FAMILY_GAPS.get(model.family, lambda _: {})(model)


def linear_relu_costs(model, x_train: torch.Tensor, y_train: torch.Tensor) -> tuple[dict[str, float], dict]:
    """Path norm (Ongie eq. 13), Φ_L (Lemma 3.4); in 1-D at L = 2 also R̄ and the spline minimum (Savarese Thm 3.1, 3.3)."""
    W, a = as_f64(model.effective_matrix()), as_f64(model.a)[0]
    out = {"costs.path_norm": C.path_norm(W, a), "costs.phi_L": C.phi_L(W, a, model.depth)}
    if W.shape[1] == 1 and model.depth == 2:
        chain = model.affine_chain()  # the exact function, from the kinks
        out["costs.rbar"] = deep_relu_net_1d_function(chain.weights, chain.biases, knot_tol=1e-9).rbar()
        out["costs.spline_min_cost"] = spline_min_cost(as_f64(x_train)[:, 0], as_f64(y_train)[:, 0])
    return out, {}


def parallel_costs(model, x_train: torch.Tensor, y_train: torch.Tensor) -> tuple[dict[str, float], dict]:
    """ℓ_{2/L} quasi-norm of the normalised output weights and the active sub-networks (Savarese App. C)."""
    Ws, alpha = [as_f64(w) for w in model.sub], as_f64(model.alpha)[0]
    bar = C.parallel_alpha_normalised(Ws, alpha)
    return ({"costs.l2L_quasinorm": C.l2L_quasinorm(bar, model.depth),
             "costs.active_subnetworks": C.active_subnetworks(Ws, alpha)}, {"alpha_normalised": bar})


def parallel_gaps(model) -> dict[str, np.ndarray]:
    """Per sub-network, Savarese Cor C.2: ‖W_i^{(1)}‖² = … = ‖W_i^{(L−1)}‖² = α_i² (α_i² read as ‖α[:, i]‖²)."""
    return {"subnet": C.parallel_balance([as_f64(w) for w in model.sub], as_f64(model.alpha.norm(dim=0)))}


register_family_costs("linear_relu", linear_relu_costs)
register_family_costs("parallel", parallel_costs)
register_family_gaps("parallel", parallel_gaps)
