"""Rebalancing a model's hidden units, through what its protocol declares (models/base.py `Structure`): every
unit to the least-penalty point of its rescaling orbit (needs `unit_rescaling`). The 1-D two-layer placements
(`insert_units`, `place_convex_minimum`) are in relu_1d.py.
"""

from __future__ import annotations

import torch

from ..models.base import RepModel
from .critical import max_unit_gap

NEGLIGIBLE = 1e-12  # a unit side below this fraction of its layer's mass is not rescaled (rebalance)


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
