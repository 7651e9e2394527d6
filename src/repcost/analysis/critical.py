"""Critical points of weight decay: the balance they have (Jacot 2023 Prop 12 and Remark 6; deep linear nets) and a
certificate for a trained model (docs/ARCHITECTURE.md, "Certificate").

Every statement here comes from a rescaling that leaves the network function unchanged: at a
critical point of  data-loss(f_θ) + λ·s·Σ_{p regularised}‖p‖²  the derivative of the penalty
along that rescaling must vanish, which equates two squared norms. λ and s never enter, only
*which* parameters are regularised (the model says so). Gaps are relative, |u − v| / max(u, v)
in [0, 1], and 0 when u = v = 0.

* Layer-wise (Jacot 2023 Prop 12). Scaling W_ℓ ↦ c_ℓ W_ℓ and b_ℓ ↦ c_1⋯c_ℓ b_ℓ with
  Π c_ℓ = 1 keeps f for positively homogeneous σ_a. At a critical point every
  ∂_{c_ℓ}‖θ‖² = 2(‖W_ℓ‖²_F + ‖b_ℓ‖² + ⋯ + ‖b_L‖²) is equal, and consecutive differences give
      ‖W_ℓ‖²_F + ‖b_ℓ‖² = ‖W_{ℓ+1}‖²_F,        ℓ = 1 … L−1,
  with b_ℓ the *stored* bias parameter (the one the penalty sees). In our β-parametrisation
  α_ℓ = W_ℓ α_{ℓ−1} + β b_ℓ the effective bias βb_ℓ scales like b_ℓ, so β does not appear
  (in terms of the effective bias the term is ‖βb_ℓ‖²/β²). Biases that are not regularised
  (Ongie, Savarese, `bias_regularised: false`) drop out: ‖W_ℓ‖²_F = ‖W_{ℓ+1}‖²_F.
* Neuron-wise (Jacot 2023 Remark 6; Ongie & Willett §3 diagonal rescaling). Scaling unit i of
  a homogeneous hidden layer ℓ — incoming row W_ℓ[i, :] and its bias b_ℓ[i] by c, outgoing
  column W_{ℓ+1}[:, i] by 1/c — keeps f, so
      ‖W_ℓ[i, :]‖² + b_ℓ[i]² (iff biases regularised) = ‖W_{ℓ+1}[:, i]‖².
  Summing over i recovers Prop 12 for that pair, so neuron balance is the stronger notion.
* Linear layers (deep linear nets). Between two linear layers of linear_relu any invertible G
  acts (W_ℓ ↦ G W_ℓ, W_{ℓ+1} ↦ W_{ℓ+1} G⁻¹) and the critical-point condition is
      W_ℓ W_ℓᵀ = W_{ℓ+1}ᵀ W_{ℓ+1}.
  Between the last linear layer W_{L−1} and the ReLU output weights a only positive diagonal
  G act (ReLU is homogeneous, not linear), so only the diagonals must agree:
  diag(W_{L−1}W_{L−1}ᵀ) = diag(aᵀa), i.e. the ReLU layer's neuron balance.

`rebalance` moves every unit to the least-penalty point of its rescaling orbit, through what the model's
protocol declares (models/base.py `Structure`: needs `unit_rescaling`).

At a critical point of  data-loss + λ·s·Σ‖p‖²  two things hold, and the certificate checks both:
* the gradient vanishes. Its size is judged against the regulariser's own pull, ‖∇(λ·s·Σ‖p‖²)‖ =
  2λs‖θ_reg‖: `stationarity` = ‖∇objective‖ / (2λs‖θ_reg‖) is 0 at a critical point and about 1
  where the data term has not yet balanced the penalty (for λ = 0 it is ‖∇‖/‖θ‖);
* the balance above (for `linear_relu` L = 2, |a_k| = ‖w_k‖, Ongie & Willett §3), and the family's own
  statements (Savarese Cor C.2 for `parallel`, reported as `subnet_gap_max`; the per-unit gap already covers
  it for units with mass). The certificate's unit gap is weighted by the units' mass,
  Σ_k|in_k − out_k| / Σ_k max(in_k, out_k) per layer: units that weight decay is shrinking towards zero carry
  no weight, whatever their ratio.

`critical_point` is true when stationarity ≤ `stationarity_tol` and the unit and linear gaps are
≤ `balance_tol` (defaults 1e-2: the balance equations hold to about 1 %); with λ = 0 only the gradient
counts. Where pre-activations sit on a ReLU kink the objective is not differentiable there; if the
plain stationarity fails, the certificate also reports `kinks` (pre-activations on a kink of a live unit at
a data point) and `clarke_stationarity`, the least gradient norm over the kinks' slopes (analysis/clarke.py) in
the same units, and that one may pass. `clarke_exact` says whether that set is the Clarke subdifferential itself
(kinks in one activation layer, as in two-layer nets) or an outer estimate (`clarke.clarke_gradient_norm`).

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
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..config.schema import CriticalOptions
from ..models.base import RepModel, UnitNorms
from ..objective import objective, reg_scale_factor
from .arrays import as_f64, float64_inputs, float64_model
from .clarke import MAX_KINKS, clarke_gradient_norm
from .family_costs import family_gaps
from .relu_1d import duality_gap


def relative_gap(u, v):
    """|u − v| / max(|u|, |v|), 0 where both are 0 (the balancedness gap used throughout; Jacot 2023 Prop 12)."""
    u, v = as_f64(u), as_f64(v)
    top = np.maximum(np.abs(u), np.abs(v))
    g = np.where(top > 0, np.abs(u - v) / np.where(top > 0, top, 1.0), 0.0)
    return float(g) if np.ndim(g) == 0 else g


@dataclass
class Balance:
    """One balance statement of layer ℓ: its sides u (incoming) and v (outgoing) and their gap, as the function that
    made it (layer_balance, neuron_balance, linear_layer_balance) defines them."""

    layer: int
    u: Any
    v: Any
    gap: Any
    diag_only: bool = False


def layer_balance(model) -> list[Balance]:
    """Per consecutive layer pair, ‖W_ℓ‖²_F + ‖b_ℓ‖² vs ‖W_{ℓ+1}‖²_F and their relative gap (Jacot 2023 Prop 12).

    b_ℓ is the stored (regularised) bias of fc, independent of β; families whose biases are not
    regularised (linear_relu, parallel, fc with bias_regularised false) compare weights only.
    For parallel the stacked sub-network layers are summed over sub-networks (layer L = α);
    the per-sub-network statement is costs.parallel_balance (Savarese Cor C.2).
    """
    terms = [(float(as_f64(w)), float(as_f64(b))) for w, b in float64_model(model).layer_sq_norms()]
    pairs = [(ell, w + b, v) for ell, ((w, b), (v, _)) in enumerate(zip(terms, terms[1:]), 1)]
    return [Balance(ell, u, v, relative_gap(u, v)) for ell, u, v in pairs]


def neuron_balance(model) -> list[Balance]:
    """Per homogeneous hidden unit, incoming vs outgoing squared weight norms and their relative gap (Jacot 2023 Remark 6).

    fc: every hidden layer ℓ = 1 … L−1, incoming = row i of W_ℓ plus b_ℓ[i]² when biases are
    regularised (the stored b, so β does not enter), outgoing = column i of W_{ℓ+1}.
    linear_relu: only the ReLU layer (ℓ = L−1): incoming = row k of the last linear layer
    W_{L−1} (not of the effective matrix: the per-unit rescaling acts on W_{L−1}'s row, b_k and
    a's column k, and the penalty sees ‖W_{L−1}[k,:]‖², not ‖W[k,:]‖²), outgoing = column k of a;
    b is free. The linear layers' (stronger) balance is linear_layer_balance.
    parallel: every sub-network hidden layer; the last (one unit per sub-network) has outgoing
    ‖α[:, i]‖² (Savarese App. C). u and v are arrays, one entry per unit in `model.hidden(x)[ℓ−1]` column order
    (for parallel, sub-network i's unit j is entry i·n_ℓ + j).
    """
    units = [(u.layer, as_f64(u.incoming).reshape(-1), as_f64(u.outgoing).reshape(-1))
             for u in float64_model(model).unit_norms()]
    return [Balance(ell, u, v, relative_gap(u, v)) for ell, u, v in units]


def linear_layer_balance(model) -> list[Balance]:
    """linear_relu: ‖W_ℓW_ℓᵀ − W_{ℓ+1}ᵀW_{ℓ+1}‖_F / max of the two norms, the deep-linear-net balancedness at weight-decay critical points (Ongie & Willett §3 architecture).

    Pairs ℓ = 1 … L−2 are linear-linear and compare full matrices. The last pair (W_{L−1}, a)
    straddles the ReLU layer, where only positive diagonal rescalings are symmetries, so it
    compares diag(W_{L−1}W_{L−1}ᵀ) with diag(aᵀa) (diag_only=True); for L = 2 it is the only pair.
    """
    out = []
    for ell, W, V, diag_only in float64_model(model).linear_pairs():
        W, V = as_f64(W), as_f64(V)
        if diag_only:
            A, B = np.sum(W ** 2, axis=1), np.sum(V ** 2, axis=0)  # diag(W_ℓW_ℓᵀ), diag(W_{ℓ+1}ᵀW_{ℓ+1})
        else:
            A, B = W @ W.T, V.T @ V
        top = max(np.linalg.norm(A), np.linalg.norm(B))
        out.append(Balance(ell, A, B, float(np.linalg.norm(A - B) / top) if top > 0 else 0.0, diag_only))
    return out


def _max_mean(prefix: str, gaps) -> dict:
    g = np.concatenate([np.zeros(0)] + [np.atleast_1d(as_f64(x)).ravel() for x in gaps])
    return {f"{prefix}_gap_max": float(g.max()), f"{prefix}_gap_mean": float(g.mean())} if g.size else {}


def balance_summary(model) -> dict[str, float]:
    """Max and mean relative balancedness gaps as scalars for summary.json (Jacot 2023 Prop 12, Remark 6; Savarese Cor C.2).

    Keys: layer_gap_{max,mean} (layer_balance), neuron_gap_{max,mean} (pooled over all units of
    neuron_balance); linear_relu adds linear_gap_{max,mean} (linear_layer_balance); parallel adds
    subnet_gap_{max,mean} (costs.parallel_balance, with α_i² read as ‖α[:, i]‖² when d_out > 1).
    """
    model = float64_model(model)  # one float64 copy (if any) for every gap below
    na = not_applicable(model)
    out = {}
    for name, gaps in (("layer", layer_balance), ("neuron", neuron_balance), ("linear", linear_layer_balance)):
        if f"{name}_gap" not in na:
            out.update(_max_mean(name, [b.gap for b in gaps(model)]))
    for name, gaps in family_gaps(model).items():
        out.update(_max_mean(name, [gaps]))
    return out


def not_applicable(model) -> dict[str, str]:
    """The balance statements whose symmetry the model does not declare (models/base.py Structure), with why."""
    st, out = model.structure, {}
    if not st.positively_homogeneous:
        why = f"the {model.family} family's activation is not positively homogeneous"
        return {"layer_gap": why, "neuron_gap": why}
    if not st.layer_rescaling:
        out["layer_gap"] = f"the {model.family} family declares no layer rescaling symmetry (Jacot 2023 Prop 12)"
    if not st.unit_rescaling:
        out["neuron_gap"] = f"the {model.family} family declares no per-unit rescaling symmetry (Jacot 2023 Remark 6)"
    return out


def weighted_gap(incoming, outgoing) -> float:
    """Σ_k |in_k − out_k| / Σ_k max(in_k, out_k): 0 iff every unit with mass is balanced."""
    a, b = as_f64(incoming).ravel(), as_f64(outgoing).ravel()
    top = np.maximum(np.abs(a), np.abs(b)).sum()
    return float(np.abs(a - b).sum() / top) if top > 0 else 0.0


def max_unit_gap(units: list[UnitNorms]) -> float:
    """The certificate's unit gap: the largest layer's mass-weighted gap (0 without hidden units)."""
    return max((weighted_gap(u.incoming.detach(), u.outgoing.detach()) for u in units), default=0.0)


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
    why = not_applicable(m).get("neuron_gap")  # the unit gap needs what neuron balance needs
    gaps = {} if why else {"unit_gap": max_unit_gap(m.unit_norms())}
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
    if why:
        out["not_applicable"] = {"unit_gap": why}
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
    opt = torch.optim.LBFGS(params, lr=1.0, history_size=50, line_search_fn="strong_wolfe", tolerance_grad=0.0,
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
        stuck, last = now == last, now  # stuck: the line search found no lower point, and would find none again
        if on_progress is not None and (evaluated[0] >= reported + chunk or stuck or evaluated[0] >= evals):
            on_progress(evaluated[0], m, now)
            reported = evaluated[0]
        if stuck:
            break
    return {"objective_start": start, "objective_end": last, "evaluations": evaluated[0],
            "descent_rel": (start - last) / abs(start) if start != 0 else 0.0}
