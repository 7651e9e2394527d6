"""How far a two-layer ReLU net on 1-D inputs is above the global minimum of its own objective: a duality gap.

With free biases, weight decay ρΣ‖p‖² on the weights and MSE, min over nets of any width of
(1/N)Σ‖f(x_i) − y_i‖² + ρΣ_k(‖a_k‖² + w_k²) is at least the convex problem over measures
min_{μ,c} (1/N)‖Φμ + c − y‖² + 2ρ‖μ‖, Φ the unit-slope features [s(x − b)]₊ (balancing a unit turns its
penalty into 2ρ·|w_k|·‖a_k‖; Bach 2017, "Breaking the curse of dimensionality with convex neural
networks"; Savarese et al. 2019 §3). Its Lagrange dual is
    D(α) = −⟨α, y⟩ − (N/4)‖α‖²   over  Σ_i α_i = 0,  ‖Σ_i α_i [s(x_i − b)]₊‖ ≤ 2ρ for all b, s = ±1,
so for any feasible α,  D(α) ≤ min ≤ objective(θ): objective(θ) − D(α) bounds how far θ is above the
global minimum. α = (2/N)(f − y) is the optimal dual point at the optimum; the net's own α, centred and
scaled into the feasible set, is one candidate, the exact dual optimum (`relu_1d_convex.convex_minimum`) the
other. In 1-D the constraint's supremum over b is attained at a data point (the feature's inner product is
piecewise linear in b with breaks there; beyond the data it is constant once Σα = 0), so 2N features check it
exactly.
"""

from __future__ import annotations

import torch

from ..models.base import RepModel
from ..objective import data_loss
from .relu_1d_convex import MAX_POINTS, convex_minimum, dual_value, kink_features, make_feasible


def relu_1d_duality_gap(x: torch.Tensor, f: torch.Tensor, y: torch.Tensor, rho: float,
                        objective: float, solve: bool = True) -> dict[str, float]:
    """x (N,), f and y (N, d_out): the net's values and the targets, rho: the coefficient on Σ‖p‖² (λ·s) > 0,
    objective: the net's objective value. Returns the best dual value found, the gap objective − dual, the gap
    relative to the objective, and how far the net's own dual point α = (2/N)(f − y) violated the constraint
    (its sup / 2ρ; 1 or less at the global minimum).

    Dual points are written α = 2ρβ, so the constraint reads ‖Φ_jᵀβ‖ ≤ 1 and D = 2ρ(−⟨β, y⟩ − (Nρ/2)‖β‖²).
    The net's own point is one candidate; with `solve` (and at most relu_1d_convex.MAX_POINTS points) the
    exact dual optimum is the other, and the better is kept: any feasible point gives a valid bound."""
    if not rho > 0:
        raise ValueError(f"the duality gap needs weight decay: rho = {rho} (with λ = 0 the dual is trivial)")
    xd, fd, yd = (t.detach().to("cpu", torch.float64).numpy() for t in (x, f, y))
    n = yd.shape[0]
    phi = kink_features(xd)[2]
    own, sup = make_feasible((fd - yd) / (n * rho), phi)  # β = α/2ρ = (f − y)/(Nρ)
    best = dual_value(own, yd, rho)
    if solve and n <= MAX_POINTS:
        best = max(best, convex_minimum(xd, yd, rho).dual_value)
    gap = objective - best
    return {"dual_value": best, "duality_gap": gap, "duality_gap_rel": gap / objective if objective > 0 else gap,
            "dual_violation": sup}


def two_layer_1d(model: RepModel, x: torch.Tensor, writable: bool = False
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(W (m, 1), b (m,), a (d_out, m)) of a two-layer ReLU net on 1-D inputs with free hidden biases, read
    through `affine_chain()`; ValueError naming what the model lacks otherwise. `writable`: the tensors must
    be the model's own parameters (an algorithm will change them in place)."""
    st = model.structure
    if not st.chain:
        raise ValueError(f"needs a chain of affine maps (the {model.family} family declares none)")
    chain = model.affine_chain()
    if model.depth != 2 or len(chain.weights) != 2 or x.shape[1] != 1:
        raise ValueError(f"needs depth 2 and 1-D inputs (this net: depth {model.depth}, {x.shape[1]}-D inputs)")
    if chain.slope != 0 or st.biases != "free" or not chain.biases:
        raise ValueError(f"needs a ReLU layer with free biases (the {model.family} net: slope {chain.slope}, "
                         f"biases {st.biases})")
    W, b, a = chain.weights[0], chain.biases[0], chain.weights[1]
    if writable and not all(isinstance(t, torch.nn.Parameter) for t in (W, b, a)):
        raise ValueError(f"the {model.family} family's chain tensors are not its parameters")
    return W, b, a


def duality_gap(model: RepModel, x: torch.Tensor, y: torch.Tensor, loss: str, rho: float) -> dict[str, float]:
    """`relu_1d_duality_gap` of a two-layer ReLU net on 1-D inputs with free biases and MSE (ρ = λ·s > 0) at its
    parameters; {} where the model or the loss is not of that kind."""
    if loss != "mse" or not rho > 0:
        return {}
    try:
        two_layer_1d(model, x)
    except (ValueError, NotImplementedError):
        return {}
    with torch.no_grad():
        f = model(x)
        obj = float(data_loss(f, y, "mse") + rho * model.param_sq_norm())
    return relu_1d_duality_gap(x[:, 0], f, y, rho, obj)
