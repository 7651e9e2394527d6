"""How far a two-layer ReLU net on 1-D inputs is above the global minimum of its own objective: a duality gap.

With free biases, weight decay ρΣ‖p‖² on the weights and MSE, min over nets of any width of
(1/N)Σ‖f(x_i) − y_i‖² + ρΣ_k(‖a_k‖² + w_k²) is at least the convex problem over measures
min_{μ,c} (1/N)‖Φμ + c − y‖² + 2ρ‖μ‖, Φ the unit-slope features [s(x − b)]₊ (balancing a unit turns its
penalty into 2ρ·|w_k|·‖a_k‖; Bach 2017, "Breaking the curse of dimensionality with convex neural
networks"; Savarese et al. 2019 §3). Its Lagrange dual is
    D(α) = −⟨α, y⟩ − (N/4)‖α‖²   over  Σ_i α_i = 0,  ‖Σ_i α_i [s(x_i − b)]₊‖ ≤ 2ρ for all b, s = ±1,
so for any feasible α,  D(α) ≤ min ≤ objective(θ): objective(θ) − D(α) bounds how far θ is above the
global minimum. α = (2/N)(f − y) is the optimal dual point at the optimum; the net's own α, and the
best point a QP solver finds from it, are centred and scaled into the feasible set. In 1-D the
constraint's supremum over b is attained at a data point (the feature's inner product is piecewise linear
in b with breaks there; beyond the data it is constant once Σα = 0), so 2N features check it exactly.
"""

from __future__ import annotations

import numpy as np
import torch

from ..models.base import RepModel
from ..objective import data_loss
from .unit_features import unit_features


SOLVE_MAX_POINTS = 500  # SLSQP's dense steps grow as N³; beyond this only the net's own dual point is used


def _feasible(beta: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, float]:
    """β (N, d) centred (Σβ = 0) and scaled into max_j ‖Φ_jᵀβ‖ ≤ 1; returns it and the sup before scaling."""
    beta = beta - beta.mean(axis=0, keepdims=True)
    sup = float(np.linalg.norm(phi.T @ beta, axis=1).max())
    return (beta / sup if sup > 1 else beta), sup


def relu_1d_duality_gap(x: torch.Tensor, f: torch.Tensor, y: torch.Tensor, rho: float,
                        objective: float, solve: bool = True) -> dict[str, float]:
    """x (N,), f and y (N, d_out): the net's values and the targets, rho: the coefficient on Σ‖p‖² (λ·s) > 0,
    objective: the net's objective value. Returns the best dual value found, the gap objective − dual, the gap
    relative to the objective, and how far the net's own dual point α = (2/N)(f − y) violated the constraint
    (its sup / 2ρ; 1 or less at the global minimum).

    Dual points are written α = 2ρβ, so the constraint reads ‖Φ_jᵀβ‖ ≤ 1 and D = 2ρ(−⟨β, y⟩ − (Nρ/2)‖β‖²).
    The net's own point is one candidate; with `solve`, scipy's SLSQP maximises D from it over the
    constraint (2N features) and the better of the two, made exactly feasible, is kept: any feasible point
    gives a valid bound, so the solver's accuracy affects only how tight it is."""
    from scipy.optimize import minimize

    if not rho > 0:
        raise ValueError(f"the duality gap needs weight decay: rho = {rho} (with λ = 0 the dual is trivial)")
    xd, fd, yd = (t.detach().to("cpu", torch.float64).numpy() for t in (x, f, y))
    n, d = yd.shape
    phi = unit_features(torch.from_numpy(xd), torch.from_numpy(xd))[2].numpy()  # (N, 2N): kinks at the data
    D = lambda b: 2 * rho * float(-(b * yd).sum() - n * rho / 2 * (b ** 2).sum())  # noqa: E731
    own, sup = _feasible((fd - yd) / (n * rho), phi)  # β = α/2ρ = (f − y)/(Nρ)
    best = D(own)
    if solve and n <= SOLVE_MAX_POINTS:
        # β in units of its own size (SLSQP's tolerances are absolute), or of the size at which one feature
        # reaches the constraint where the net's own point is ~0
        scale = max(float(np.abs(own).max()), 1.0 / max(float(phi.sum(axis=0).max()), 1e-300))
        cons = [{"type": "eq", "fun": lambda v: (v.reshape(n, d)).sum(axis=0) * scale}]
        if d == 1:
            cons.append({"type": "ineq", "fun": lambda v: 1.0 - np.abs(phi.T @ v * scale)})
        else:
            cons.append({"type": "ineq",
                         "fun": lambda v: 1.0 - np.linalg.norm(phi.T @ v.reshape(n, d) * scale, axis=1) ** 2})
        res = minimize(lambda v: -D(v.reshape(n, d) * scale) / (2 * rho * scale), own.ravel() / scale,
                       method="SLSQP", constraints=cons, options={"maxiter": 1000, "ftol": 1e-15})
        solved, _ = _feasible(res.x.reshape(n, d) * scale, phi)
        best = max(best, D(solved))
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
