"""A critical-point certificate for a trained model (docs/ARCHITECTURE.md, "Certificate").

At a critical point of  data-loss + λ·s·Σ‖p‖²  two things hold:
* the gradient vanishes. Its size is judged against the regulariser's own pull, ‖∇(λ·s·Σ‖p‖²)‖ =
  2λs‖θ_reg‖: `stationarity` = ‖∇objective‖ / (2λs‖θ_reg‖) is 0 at a critical point and about 1
  where the data term has not yet balanced the penalty (for λ = 0 it is ‖∇‖/‖θ‖);
* the rescalings that keep the network function (positive homogeneity: scale a unit's incoming
  weights and bias by c and its outgoing weights by 1/c; linear layers: any invertible G) leave
  the data loss alone, so the penalty must be stationary along them: every unit's incoming and
  outgoing squared norms agree (Jacot 2023 Remark 6; for `linear_relu` L = 2 this is
  |a_k| = ‖w_k‖, Ongie & Willett §3), deep-linear pairs satisfy W_ℓW_ℓᵀ = W_{ℓ+1}ᵀW_{ℓ+1}, and the
  family's own statements hold (Savarese Cor C.2 for `parallel`, reported as `subnet_gap_max`; the
  per-unit gap already covers it for units with mass). The unit gap is weighted by
  the units' mass, Σ_k|in_k − out_k| / Σ_k max(in_k, out_k) per layer: units that weight decay
  is shrinking towards zero carry no weight, whatever their ratio.

`critical_point` is true when stationarity ≤ `stationarity_tol` and the unit and linear gaps are
≤ `balance_tol` (defaults 1e-2: the balance equations hold to about 1 %); with λ = 0 only the gradient
counts. Where pre-activations sit on a ReLU kink the objective is not differentiable there; if the
plain stationarity fails, the certificate also reports `kinks` (pre-activations on a kink of a live unit at
a data point) and `clarke_stationarity`, the least gradient norm over the kinks' slopes (analysis/clarke.py) in
the same units, and that one may pass. `clarke_exact` says what that set is (`clarke.clarke_gradient_norm`):
the Clarke subdifferential itself where the kinks lie in one activation layer with independent pre-activation
gradients (two-layer nets: the regularity condition of Tian & So 2023), else (deeper nets with kinks in several
layers) an outer estimate, on which a small measure is necessary for Clarke stationarity but not sufficient.

With `descent_evals` > 0 it also reports `descent_rel`, the relative objective decrease that full-batch
L-BFGS (`lbfgs_descent`: strong-Wolfe line search, so the objective never rises; float64, on a copy) finds from
the model's parameters in about that many objective evaluations (the count made is reported back as
`descent_evals`). The gradient cannot tell a point at a nonsmooth local minimum (pre-activations on ReLU kinks:
the gradient does not vanish, but no direction descends) from one in a shallow, ill-conditioned valley that
first-order steps cross slowly; L-BFGS either stalls at once (near 0) or keeps descending (clearly positive:
training stopped on the way). The decrease is a lower bound on how far above a local minimum the model is, not a
proof of minimality when small. It is reported beside the verdict, not part of it.

Where the model is a two-layer ReLU net on 1-D inputs with free biases and the loss is MSE, it also
reports `duality_gap_rel`: an upper bound on how far the objective is above its global minimum over nets
of any width, relative to the objective (analysis/relu_1d.py). Also beside the verdict.

A term whose symmetry the model does not declare (models/base.py `Structure`) is not computed: it is
listed in `not_applicable` with the reason instead.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import numpy as np
import torch

from ..config.schema import CriticalOptions
from ..models.base import UnitNorms
from ..objective import objective, reg_scale_factor
from .arrays import as_f64, float64_inputs, float64_model
from .balance import linear_layer_balance
from .clarke import MAX_KINKS, clarke_gradient_norm
from .family_costs import family_gaps
from .relu_1d import duality_gap

HISTORY = 50  # L-BFGS curvature pairs kept by the descent check


def weighted_gap(incoming, outgoing) -> float:
    """Σ_k |in_k − out_k| / Σ_k max(in_k, out_k): 0 iff every unit with mass is balanced."""
    a, b = as_f64(incoming).ravel(), as_f64(outgoing).ravel()
    top = np.maximum(np.abs(a), np.abs(b)).sum()
    return float(np.abs(a - b).sum() / top) if top > 0 else 0.0


def max_unit_gap(units: list[UnitNorms]) -> float:
    """The certificate's unit gap: the largest layer's mass-weighted gap (0 without hidden units)."""
    return max((weighted_gap(u.incoming.detach(), u.outgoing.detach()) for u in units), default=0.0)


def critical_point_certificate(model, x: torch.Tensor, y: torch.Tensor, loss: str, lam: float, reg_scale: str,
                               stationarity_tol: float = CriticalOptions.stationarity_tol,
                               balance_tol: float = CriticalOptions.balance_tol,
                               descent_evals: int = 0, max_kinks: int = MAX_KINKS) -> dict:
    """The certificate's scalars (prefixed `critical.` in summaries, the duality gap `certify.`): gradient norms, stationarity, gaps, verdict;
    `not_applicable` maps each term the model's structure does not support to the reason."""
    m = float64_model(model)  # one float64 copy (if any) for the gradient and the gaps
    params = [p for p in m.parameters() if p.requires_grad]
    with torch.enable_grad():  # ‖∇objective‖, ‖θ‖ (all trainable parameters), ‖∇ of the λ-term‖ = 2λs‖θ_reg‖
        obj, _, sq = objective(m, *float64_inputs(m, x, y), loss, lam, reg_scale)
        grads = torch.autograd.grad(obj, params, allow_unused=True)
    g = math.sqrt(sum(float((gr.double() ** 2).sum()) for gr in grads if gr is not None))
    theta = math.sqrt(sum(float((p.detach().double() ** 2).sum()) for p in params))
    reg = 2.0 * lam * reg_scale_factor(reg_scale, m.depth) * math.sqrt(float(sq.detach()))

    def relative(grad: float) -> float:  # a gradient norm against the penalty's pull (λ = 0: against ‖θ‖)
        return grad / reg if reg > 0 else (grad / theta if theta > 0 else grad)

    out = {"grad_norm": g, "grad_norm_rel": g / theta if theta > 0 else g, "stationarity": relative(g)}
    gaps, na = {}, {}
    st = m.structure
    if st.unit_rescaling and st.positively_homogeneous:
        gaps["unit_gap"] = max_unit_gap(m.unit_norms())
    else:
        na["unit_gap"] = (f"the {m.family} family declares no per-unit rescaling symmetry with a positively "
                          "homogeneous activation (Structure.unit_rescaling)")
    lin = linear_layer_balance(m)
    if lin:
        gaps["linear_gap"] = max(b.gap for b in lin)
    out.update(gaps)
    for name, arr in family_gaps(m).items():  # reported; unweighted, so not part of the verdict
        out[f"{name}_gap_max"] = float(np.max(as_f64(arr))) if np.size(arr) else 0.0
    finite = all(math.isfinite(v) for v in out.values())
    stationary = out["stationarity"] <= stationarity_tol
    if finite and not stationary:  # pre-activations on a ReLU kink: the least gradient over their slopes
        clarke, kinks, exact = clarke_gradient_norm(m, *float64_inputs(m, x, y), loss, lam, reg_scale, max_kinks=max_kinks)
        if kinks:
            out["kinks"] = kinks
            out["clarke_stationarity"] = relative(clarke)
            if exact is not None:
                out["clarke_exact"] = exact
            stationary = out["clarke_stationarity"] <= stationarity_tol  # NaN (too many kinks): not certified
    # without a penalty (λ = 0) nothing forces balance: only the gradient counts
    balanced = lam == 0 or all(v <= balance_tol for v in gaps.values())
    out["critical_point"] = bool(finite and stationary and balanced)
    if finite:  # a two-layer 1-D ReLU net: how far above the global minimum (not part of the verdict)
        out.update(duality_gap(m, x, y, loss, lam, reg_scale))
    if descent_evals > 0 and finite:
        d = lbfgs_descent(m, x, y, loss, lam, reg_scale, descent_evals)
        out["descent_rel"], out["descent_evals"] = d["descent_rel"], d["evaluations"]
    if na:
        out["not_applicable"] = na
    return out


def lbfgs_descent(model, x: torch.Tensor, y: torch.Tensor, loss: str, lam: float, reg_scale: str, evals: int,
                  every: int | None = None,
                  on_progress: Callable[[int, torch.nn.Module, float], None] | None = None) -> dict[str, float]:
    """{objective_start, objective_end, descent_rel}: L-BFGS with `evals` objective evaluations on a float64 copy.

    `descent_rel` = (start − end) / |start|. With `on_progress`, it is called as
    on_progress(evaluations done, the copy, its objective) every `every` evaluations (one L-BFGS history
    throughout).
    """
    m = copy.deepcopy(model).to(torch.float64)
    xd, yd = float64_inputs(m, x, y)
    params = [p for p in m.parameters() if p.requires_grad]
    chunk = (every or evals) if on_progress is not None else evals  # evaluations between reports
    opt = torch.optim.LBFGS(params, lr=1.0, history_size=HISTORY, line_search_fn="strong_wolfe", tolerance_grad=0.0,
                            tolerance_change=0.0)  # no stop but the evaluation budget

    def value() -> float:
        with torch.no_grad():
            return float(objective(m, xd, yd, loss, lam, reg_scale)[0])

    evaluated = [0]

    def closure() -> torch.Tensor:
        evaluated[0] += 1
        opt.zero_grad()
        with torch.enable_grad():
            obj = objective(m, xd, yd, loss, lam, reg_scale)[0]
            obj.backward()
        return obj

    start, group = value(), opt.param_groups[0]
    last, reported = start, 0  # last: the objective after the latest step (the end value once the loop stops)
    while evaluated[0] < evals:
        # max_iter = max_eval (an iteration takes one evaluation or more): stop at the next report
        group["max_iter"] = group["max_eval"] = min(evals, reported + chunk) - evaluated[0]
        opt.step(closure)  # may overrun its max_eval by a line search's last evaluations
        now = value()
        if on_progress is not None and (evaluated[0] >= reported + chunk or now == last or evaluated[0] >= evals):
            on_progress(evaluated[0], m, now)
            reported = evaluated[0]
        stuck = now == last  # the line search found no lower point: L-BFGS is stuck here, and would stay
        last = now
        if stuck:
            break
    return {"objective_start": start, "objective_end": last, "evaluations": evaluated[0],
            "descent_rel": (start - last) / abs(start) if start != 0 else 0.0}
