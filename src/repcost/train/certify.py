"""Certified stopping (`train.certify`; docs/recipes-and-certificates.md, "Certified stopping").

A run with `train.certify.gap_tol` set asks, at the end of every phase that trains the stated objective, how far
its objective can be above the global minimum: the duality gap of the convex 1-D problem
(`analysis.relu_1d.duality_gap`, two-layer ReLU nets on 1-D inputs with MSE). A member whose gap is within the
tolerance stops there, certified. After the schedule the budget allows `certify.rounds` escalation rounds
(`TrainConfig.all_phases`); a member still above the tolerance at the end of the budget is not certified and says
so. Where no gap exists (deeper nets, other inputs or losses) nothing escalates and the run says that its
certificate is local only (the critical-point certificate), not a global one.

With `certify.cost_tol` set the run also states C(θ)/C_min, C_min the cost of the min-norm interpolant of its
data (Savarese et al. 2019 Thm 3.3): the duality gap certifies the regularised objective, and C(θ)/C_min says
whether its λ is small enough for that minimum to be the interpolation problem's. The run's last line names
which of the two it did not reach.
"""

from __future__ import annotations

import math

import torch

from ..analysis.relu_1d import spline_min_cost
from ..config.schema import TrainConfig


def summary_fields(cfg: TrainConfig, stop_reason: str, gap: float | None, rounds: int, steps: int, cost: float,
                   x: torch.Tensor, y: torch.Tensor) -> dict:
    """summary.json's record of certified stopping (empty when `train.certify` is off; gap null where none exists).

    With `cost_tol`, C(θ)/C_min as `certify.cost_over_min`: on 1-D data with one output where the duality gap exists
    (a two-layer ReLU net, Savarese et al. 2019's setting); null otherwise, and where C_min = 0 (constant labels)."""
    c = cfg.certify
    if c.gap_tol is None:
        return {}
    out = {"certified": stop_reason == "certified", "certify.gap_rel": gap, "certify.gap_tol": c.gap_tol,
           "certify.rounds": rounds, "certify.max_rounds": c.rounds, "certify.budget_steps": cfg.total_steps,
           "certify.steps": steps}
    if c.cost_tol is not None:
        one_d = gap is not None and x.shape[1] == 1 and y.reshape(len(y), -1).shape[1] == 1
        c_min = spline_min_cost(x, y) if one_d else 0.0
        out.update({"certify.cost_tol": c.cost_tol, "certify.cost_over_min": cost / c_min if c_min > 0 else None})
    return out


def describe(summary: dict) -> str | None:
    """The one line a run with `train.certify` ends on."""
    if "certified" not in summary:
        return None
    gap, rounds = summary["certify.gap_rel"], summary["certify.rounds"]
    if gap is None:
        return ("not certified: no global-minimum certificate exists for this model (the duality gap needs a two-layer "
                "ReLU net on 1-D inputs with MSE and λ > 0); the critical-point certificate above is a local one, "
                "and agreement across seeds (train.ensemble_size) is the check left")
    after = f"after {rounds} escalation round{'s' * (rounds != 1)}, {summary['certify.steps']} steps"
    if summary["certified"]:
        line = f"certified within {100 * gap:.3g} % of the global minimum of its objective (duality gap; {after})"
    else:
        tol = f"{100 * summary['certify.gap_tol']:.3g} %"
        line = (f"not certified: gap {100 * gap:.3g} % (> train.certify.gap_tol {tol}) "
                + (f"when it stopped ({summary.get('stop_reason')}, {after})" if summary.get("stop_reason") != "budget"
                   else f"after the budget of {summary['certify.max_rounds']} escalation rounds, "
                   f"{summary['certify.budget_steps']} steps (raise train.certify.rounds)"))
    ratio = summary.get("certify.cost_over_min")  # the cost half: C(θ)/C_min against `certify.cost_tol`
    if ratio is not None:
        tol = f"{100 * summary['certify.cost_tol']:.3g} %"
        line += (f"; C(θ) within {tol} of the min-norm interpolant's cost (C/C_min = {ratio:.4f})"
                 if abs(ratio - 1) <= summary["certify.cost_tol"] else
                 f"; C(θ) NOT within {tol} of the min-norm interpolant's cost: C/C_min = {ratio:.4f} "
                 "(train.certify.cost_tol; a smaller train.lam brings the minimum closer to interpolation)")
    st = summary.get("critical.clarke_stationarity", summary.get("critical.stationarity", math.nan))
    if summary["certified"] and summary.get("critical_point") is False:  # the local certificate disagrees, or cannot judge
        line += (f"; the critical-point certificate did not judge it (the Clarke measure over its "
                 f"{summary.get('critical.kinks')} kinks is not computed: raise analysis.critical.max_kinks)"
                 if math.isnan(st) else f"; not a critical point (stationarity {st:.3g}): the gap bounds the "
                 "objective, and a point that close to the minimum's objective need not be a minimiser")
    return line
