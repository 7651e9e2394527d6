"""Algorithms on a model's hidden units, through what its protocol declares (models/base.py `Structure`).

`rebalance`: every unit to the least-penalty point of its rescaling orbit (needs `unit_rescaling`).
`insert_units`: one conditional-gradient step per idle unit of a two-layer ReLU net on 1-D inputs
(unit_features.py), the unit re-placed where a new one lowers the objective most.
"""

from __future__ import annotations

import numpy as np
import torch

from ..models.base import RepModel, UnitNorms
from ..objective import data_loss
from .certificate import weighted_gap
from .relu_1d_dual import two_layer_1d
from .relu_1d_convex import convex_minimum
from .unit_features import UnitFeature, best_unit_feature

NEGLIGIBLE = 1e-12  # a unit side below this fraction of its layer's mass is not rescaled (rebalance)
IDLE = 1e-3  # a unit carrying at most this fraction of the net's path mass may be re-placed (insert_units)


def max_unit_gap(units: list[UnitNorms]) -> float:
    """The certificate's unit gap: the largest layer's mass-weighted gap (0 without hidden units)."""
    return max((weighted_gap(u.incoming.detach(), u.outgoing.detach()) for u in units), default=0.0)


def rebalance(model: RepModel, max_sweeps: int = 1000, tol: float = 1e-12) -> tuple[float, float]:
    """Move to the point of least penalty on the orbit of per-unit rescalings (the function is unchanged).

    Along unit k's rescaling the penalty is c²·in_k + out_k/c², least at c⁴ = out_k/in_k, where
    in_k = out_k (Jacot 2023 Remark 6): the balance a critical point has. Neighbouring layers share a
    matrix, so one sweep's scales (all layers, from the norms at the sweep's start) leave the next
    layer slightly off; sweeps repeat until no unit moves by more than `tol` (a Jacobi iteration on a
    convex function of the log-scales; cf. Stock et al. 2019, "Equi-normalization of neural
    networks", which updates layer by layer). Returns the certificate's unit gap before and after.
    """
    st = model.structure
    if not (st.unit_rescaling and st.positively_homogeneous):
        raise ValueError(f"rebalancing needs a per-unit rescaling symmetry and a positively homogeneous activation "
                         f"(the {model.family} family declares unit_rescaling={st.unit_rescaling}, "
                         f"positively_homogeneous={st.positively_homogeneous})")
    where = [next(c for c in type(model).__mro__ if name in vars(c)) for name in ("unit_norms", "rescale_units")]
    if where[0] is not where[1] and issubclass(where[0], where[1]):  # norms redefined below their rescaling
        raise NotImplementedError(f"{type(model).__name__} defines its own unit_norms but no rescale_units "
                                  "to go with them")
    before = max_unit_gap(model.unit_norms())
    with torch.no_grad():
        for _ in range(max_sweeps):
            moved = 0.0
            for u in model.unit_norms():
                inc, out = u.incoming.detach().double(), u.outgoing.detach().double()
                # a unit that weight decay drove to ~0 on either side is left as it is: with a free
                # bias its orbit's infimum is at c -> ∞ (a constant a·relu(b) costs nothing in the
                # limit), and c⁴ = out/in would overflow
                floor = NEGLIGIBLE * float(torch.maximum(inc, out).sum())
                live = (inc > floor) & (out > floor)
                c = torch.where(live, (out / inc.where(live, torch.ones_like(inc))) ** 0.25, torch.ones_like(inc))
                moved = max(moved, float((c.log().abs()).max()) if c.numel() else 0.0)
                model.rescale_units(u.layer, c)
            if moved <= tol:
                break
    return before, max_unit_gap(model.unit_norms())


def _objective(model: RepModel, x: torch.Tensor, y: torch.Tensor, rho: float) -> float:
    """MSE + ρΣ‖p‖², the objective a unit placement must lower."""
    return float(data_loss(model(x), y, "mse") + rho * model.param_sq_norm())


def insert_units(model: RepModel, x: torch.Tensor, y: torch.Tensor, n: int, rho: float) -> list[UnitFeature]:
    """Re-place up to n idle units where a new unit lowers MSE + ρΣ‖p‖² most (PhaseConfig.insert_units).

    Two-layer ReLU nets on 1-D inputs with free biases whose chain tensors are the parameters
    (`relu_1d_dual.two_layer_1d`): one at a time, the idle unit of least path mass |w_k|·‖a_k‖ (≤ 1e-3 of
    the net's) becomes the best gap feature for the current residual (`best_unit_feature`), balanced
    (|w_k| = ‖a_k‖ = √‖η‖), while that feature violates the dual condition; the rest is unchanged.
    Returns what was inserted, one entry per unit.
    """
    W, b, a = two_layer_1d(model, x, writable=True)
    c = model.affine_chain().biases[-1]
    c = c if isinstance(c, torch.nn.Parameter) else None
    objective = lambda: _objective(model, x, y, rho)  # noqa: E731
    inserted: list[UnitFeature] = []
    with torch.no_grad():
        mass = W[:, 0].detach().double().abs() * a.detach().double().norm(dim=0)
        idle = [k for k in torch.argsort(mass).tolist() if mass[k] <= IDLE * float(mass.sum())]
        for k in idle[:n]:
            before = objective()
            saved = [t.clone() for t in (W[k], b[k], a[:, k], c if c is not None else W[k])]
            if c is not None:  # an idle unit can still add a constant a_k·[b_k]₊ (a kink beyond the data): keep it in c
                c += (a[:, k:k + 1] * torch.relu(x[:, 0] * W[k, 0] + b[k])).mean(dim=1)
            a[:, k] = 0
            feat = best_unit_feature(x[:, 0], model(x) - y, rho)
            if feat is not None and feat.violation > 1:
                t = float(feat.eta.norm()) ** 0.5
                W[k, 0] = feat.sign * t
                b[k] = -feat.sign * feat.kink * t
                a[:, k] = (feat.eta / t).to(a.dtype)
            if feat is None or not feat.violation > 1 or not objective() < before:  # only a step that lowers it
                W[k], b[k], a[:, k] = saved[:3]
                if c is not None:
                    c.copy_(saved[3])
                break
            inserted.append(feat)
    return inserted


def place_convex_minimum(model: RepModel, x: torch.Tensor, y: torch.Tensor, rho: float) -> int:
    """Make the net the minimiser of the convex problem at ρ (PhaseConfig.convex_units): the global minimum of
    MSE + ρΣ‖p‖² over nets of any width (`relu_1d_convex.convex_minimum`), its units balanced, the others zero.

    A fully corrective form of `insert_units`: all units are re-placed at once. Needs a scalar output with a free
    output bias and at least as many units as the minimiser has; kept only if it lowers the objective (returns the
    units placed, 0 if the net was kept).
    """
    W, b, a = two_layer_1d(model, x, writable=True)
    c = model.affine_chain().biases[-1]
    if a.shape[0] != 1 or not isinstance(c, torch.nn.Parameter):
        raise ValueError("needs a scalar output with a free output bias")
    sol = convex_minimum(x[:, 0].detach().double().cpu().numpy(), y[:, 0].detach().double().cpu().numpy(), rho)
    k, eta = sol.eta.shape[0], sol.eta[:, 0]
    if k > W.shape[0]:
        raise ValueError(f"the minimiser has {k} units, the net {W.shape[0]}: raise model.width to at least {k}")
    objective = lambda: _objective(model, x, y, rho)  # noqa: E731
    with torch.no_grad():
        before, saved = objective(), [t.clone() for t in (W, b, a, c)]
        root = torch.as_tensor(np.sqrt(np.abs(eta)), dtype=W.dtype, device=W.device)
        s = torch.as_tensor(sol.signs, dtype=W.dtype, device=W.device)
        for t in (W, b, a):
            t.zero_()
        W[:k, 0] = s * root
        b[:k] = -s * root * torch.as_tensor(sol.kinks, dtype=W.dtype, device=W.device)
        a[0, :k] = torch.as_tensor(np.sign(eta), dtype=W.dtype, device=W.device) * root
        c.fill_(float(sol.c[0]))
        if not objective() < before:
            for t, old in zip((W, b, a, c), saved):
                t.copy_(old)
            return 0
    return k
