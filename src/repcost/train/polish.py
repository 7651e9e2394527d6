"""Polish: take a trained net to a critical point of its objective (PhaseConfig.polish).

Two nonsmooth parts stop smooth methods short of a critical point of a weight-decay-trained ReLU net:

* units that weight decay has cut off (no output on the data, or no outgoing weight) keep weights that
  shrink geometrically but never reach 0, and every one of their pre-activations sits on a kink. They are
  removed exactly (`remove_dead_units`): their parameters set to 0 and frozen there, which changes neither
  the function on the data nor, beyond that contribution, the objective;
* live units put pre-activations on the kink z = 0 at data points (Jacot et al. 2022 Prop 1: the minimiser
  is a function of the pre-activations, and a kink is part of it). These are held as equality constraints
  z = 0 with the ReLU's slope s ∈ [a, 1] as the multiplier: with the kinked entries' activation replaced by
  s·z (equal to σ(z) on z = 0), the critical points of L(θ, s) = objective(θ; s) are exactly the points
  where a slope in the box makes the chain-rule gradient vanish with every kinked z = 0, the set whose least
  norm analysis/clarke.py measures.

The polish runs three stages on a float64 copy, full batch: the removal; full-batch L-BFGS with a strong-Wolfe
line search until it stalls, which brings the pre-activations that belong on a kink close to 0; then Newton's method
on ∇L = 0 (symmetric indefinite: MINRES on Hessian-vector products by double backpropagation). The kinks are found
again at every Newton step (|z| ≤ IDENTIFY × the unit's largest |z|, with a backward signal, as analysis/clarke.py
counts them); a step stops where the first other pre-activation reaches its kink (the ratio test of an active-set
method), else it backtracks on ‖∇L‖; a slope that a step carries out of [a, 1] is clipped and held at that end: its
entry follows that linear piece and its z is free again. It stops when ‖∇L‖ is below `tol` times the penalty's pull
2λs‖θ_reg‖ (the certificate's unit), after `steps` Newton steps or `seconds` seconds; the Newton point is kept only
where its objective is below the L-BFGS point's, so the objective never rises beyond the removal's change.

What it reaches is measured, not promised (docs/usage.md): on the deep-net presets the active set changes from step
to step and the residual stalls far above a critical point's; the Newton steps lower the objective below where
L-BFGS stalls (so those trained points are not local minima), not the Clarke measure.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..analysis.arrays import float64_inputs, float64_model
from ..analysis.clarke import _live, _Slopes
from ..objective import objective, reg_scale_factor

log = logging.getLogger(__name__)

DEAD = 1e-12  # a unit whose output into the next layer is at most this fraction of its layer's largest is removed
TOL = 1e-10  # ‖∇L‖ against the penalty's pull at which the polish stops
MINRES_ITER = 2000  # Hessian-vector products per Newton step at most
LBFGS_EVALS = 2000  # objective evaluations of the L-BFGS descent before the Newton steps
IDENTIFY = 1e-4  # a pre-activation within this fraction of its unit's largest |z| is held on its kink
HALVINGS = 30  # line-search step halvings before the polish gives up


@dataclass
class PolishResult:
    """What a polish did: Newton steps, units removed, kinks held at the end (free slopes, slopes at a bound),
    the relative residual ‖∇L‖ / 2λs‖θ_reg‖ at the end, the objective before and after, and its time."""

    steps: int
    removed: int
    kinks: int
    at_bound: int
    residual: float
    objective_start: float
    objective_end: float
    seconds: float


def _unit_entries(model, layer: int, units: torch.Tensor) -> list[torch.Tensor]:
    """Per parameter, the entries that hidden layer `layer`'s `units` own (incoming or outgoing), read off as the
    support of the gradient of their norms at all-ones parameters (the protocol's `unit_norms`, nothing else)."""
    params = [p for p in model.parameters() if p.requires_grad]
    saved = [p.detach().clone() for p in params]
    with torch.no_grad():
        for p in params:
            p.fill_(1.0)
    with torch.enable_grad():
        u = next(u for u in model.unit_norms() if u.layer == layer)
        mass = u.incoming[units].sum() + u.outgoing[units].sum()
        grads = torch.autograd.grad(mass, params, allow_unused=True)
    with torch.no_grad():
        for p, s in zip(params, saved):
            p.copy_(s)
    return [g != 0 if g is not None else torch.zeros_like(p, dtype=torch.bool) for g, p in zip(grads, params)]


def remove_dead_units(model, x: torch.Tensor) -> tuple[int, list[torch.Tensor]]:
    """Set to 0 every unit whose output into the next layer (‖σ(z_k)‖ over the data times its outgoing norm) is at
    most DEAD times its layer's largest, until none is left; returns how many and, per parameter, the entries
    zeroed (the polish keeps them at 0). The units are those `unit_norms` names: none without
    `Structure.unit_rescaling`."""
    params = [p for p in model.parameters() if p.requires_grad]
    frozen = [torch.zeros_like(p, dtype=torch.bool) for p in params]
    removed = 0
    while model.structure.unit_rescaling:
        with torch.no_grad():
            hs = model.hidden(x)
            dead = []
            for u in model.unit_norms():
                out = hs[u.layer - 1].post.norm(dim=0) * u.outgoing.sqrt()
                gone = (u.incoming == 0) & (u.outgoing == 0)
                dead.append((u.layer, (out <= DEAD * out.max()) & ~gone))
        if not any(bool(d.any()) for _, d in dead):
            return removed, frozen
        for layer, d in dead:
            if d.any():
                removed += int(d.sum())
                with torch.no_grad():
                    for p, f, e in zip(params, frozen, _unit_entries(model, layer, d)):
                        p.masked_fill_(e, 0.0)
                        f |= e
    return removed, frozen


class _Kinks:
    """The kinked pre-activations at the current parameters and their slopes, kept per activation call across
    steps (full-shape tensors): `slope` the value, `bound` whether it is held at an end of [a, 1]."""

    def __init__(self):
        self.slope: list[torch.Tensor] = []
        self.bound: list[torch.Tensor] = []
        self.lo: list[float] = []

    def find(self, model, x, y, loss, lam, reg_scale) -> list[torch.Tensor]:
        finder = _Slopes(IDENTIFY)
        with torch.no_grad(), finder:
            model(x)
        masks = [m for m, _ in finder.found]
        if not self.slope:
            self.lo = [lo for _, lo in finder.found]
            self.slope = [torch.full(m.shape, (1.0 + lo) / 2, dtype=torch.float64) for m, lo in finder.found]
            self.bound = [torch.zeros_like(m) for m in masks]
        if any(bool(m.any()) for m in masks):
            masks = _live(model, x, y, loss, lam, reg_scale, masks, self.flat(masks))
        for m, b in zip(masks, self.bound):
            b &= m  # a kink that left is free again should it come back
        return masks

    def flat(self, masks) -> torch.Tensor:
        return torch.cat([s[m] for s, m in zip(self.slope, masks)]) if masks else torch.zeros(0, dtype=torch.float64)

    def set(self, masks, s: torch.Tensor) -> None:
        """Take the slopes `s` (flat, in mask order), clipped to [a, 1]; those clipped become bound."""
        at = 0
        for m, sl, b, lo in zip(masks, self.slope, self.bound, self.lo):
            n = int(m.sum())
            v = s[at:at + n]
            at += n
            b[m] |= (v <= lo) | (v >= 1.0)
            sl[m] = v.clamp(lo, 1.0)


def _pre_activations(model, x: torch.Tensor) -> list[torch.Tensor]:
    finder = _Slopes(0.0)
    with torch.no_grad(), finder:
        model(x)
    return finder.inputs


def _first_crossing(model, x, params, start, direction) -> float:
    """The fraction of the step θ + t·Δ (t ∈ (0, 1]) at which the first pre-activation not held on a kink reaches
    its kink, on the straight line between its values at t = 0 and t = 1 (1 where none changes sign): the ratio
    test of an active-set method, so a step ends where the activation pattern it was computed for does."""
    before = _pre_activations(model, x)
    with torch.no_grad():
        for p, d in zip(params, direction):
            p.add_(d)
    after = _pre_activations(model, x)
    with torch.no_grad():
        for p, p0 in zip(params, start):
            p.copy_(p0)
    t = 1.0
    for z0, z1 in zip(before, after):
        a = z0.abs()
        on = a <= IDENTIFY * (a.reshape(-1, a.shape[-1]).amax(0) if a.dim() > 1 else a.amax())
        cross = (z0 * z1 < 0) & ~on  # entries on a kink already (held, or with no backward signal) do not count
        if cross.any():
            t = min(t, float((z0[cross] / (z0[cross] - z1[cross])).min()))
    return t


def _descend(model, params: list[torch.Tensor], closure_value) -> None:
    """Full-batch L-BFGS with a strong-Wolfe line search until it stalls: it brings the pre-activations that belong
    on a kink close to 0, where the kink tolerance finds them (removed units stay at 0: nothing reaches them)."""
    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=LBFGS_EVALS, max_eval=LBFGS_EVALS, history_size=100,
                            line_search_fn="strong_wolfe", tolerance_grad=0.0, tolerance_change=1e-16)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        with torch.enable_grad():
            obj = closure_value()
            obj.backward()
        return obj

    opt.step(closure)
    opt.zero_grad(set_to_none=True)


def polish(model, x: torch.Tensor, y: torch.Tensor, loss: str, lam: float, reg_scale: str, steps: int,
           seconds: float = math.inf, tol: float = TOL) -> PolishResult:
    """Polish `model` in place (module docstring): dead units removed, then Newton steps on ∇L(θ, s) = 0 until the
    relative residual is ≤ tol, `steps` steps or `seconds` seconds. Runs in float64 on the model's device; the
    parameters are written back in the model's dtype."""
    from scipy.sparse.linalg import LinearOperator, minres  # loaded where a polish runs

    t0 = time.perf_counter()
    target, model = model, float64_model(model)
    x, y = float64_inputs(model, x, y)
    params = [p for p in model.parameters() if p.requires_grad]

    def value() -> float:
        with torch.no_grad():
            return float(objective(model, x, y, loss, lam, reg_scale)[0])

    start = value()
    removed, frozen = remove_dead_units(model, x)
    _descend(model, params, lambda: objective(model, x, y, loss, lam, reg_scale)[0])
    descended, kept = value(), [p.detach().clone() for p in params]
    log.info("polish: L-BFGS to objective %.12g in %.1f s", descended, time.perf_counter() - t0)
    pull = 2.0 * lam * reg_scale_factor(reg_scale, model.depth)
    kinks, step, residual, masks = _Kinks(), 0, math.inf, []
    while True:
        masks = kinks.find(model, x, y, loss, lam, reg_scale)
        s = kinks.flat(masks).requires_grad_(True)
        free = [~f for f in frozen] + [~torch.cat([b[m] for b, m in zip(kinks.bound, masks)])
                                      if masks else torch.zeros(0, dtype=torch.bool)]
        variables = params + [s]

        def gradient(create_graph: bool) -> list[torch.Tensor]:
            with torch.enable_grad(), _Slopes(0.0, masks, s, through_zero=True):
                obj = objective(model, x, y, loss, lam, reg_scale)[0]
                gs = torch.autograd.grad(obj, variables, create_graph=create_graph, allow_unused=True)
            return [g if g is not None else torch.zeros_like(v) for g, v in zip(gs, variables)]

        def norm(gs) -> float:
            return math.sqrt(sum(float((g.detach()[f] ** 2).sum()) for g, f in zip(gs, free)))

        grads = gradient(create_graph=True)
        f0 = norm(grads)
        with torch.no_grad():
            scale = pull * math.sqrt(float(model.param_sq_norm())) or 1.0
        residual = f0 / scale
        log.info("polish step %d: residual %.3g, %d kinks (%d at a bound), objective %.12g", step, residual,
                 s.numel(), int(s.numel() - free[-1].sum()), value())
        if residual <= tol or step >= steps or time.perf_counter() - t0 >= seconds:
            break
        rhs = -torch.cat([g.detach()[f] for g, f in zip(grads, free)]).cpu().numpy()

        def scatter(u) -> list[torch.Tensor]:
            out, at = [], 0
            for v, f in zip(variables, free):
                t = torch.zeros_like(v)
                n = int(f.sum())
                t[f] = torch.as_tensor(u[at:at + n], dtype=t.dtype, device=t.device)
                at += n
                out.append(t)
            return out

        def hvp(u):
            live = [i for i, g in enumerate(grads) if g.requires_grad]
            hv = [None] * len(variables)
            if live:
                d = scatter(u)
                got = torch.autograd.grad([grads[i] for i in live], variables, grad_outputs=[d[i] for i in live],
                                          retain_graph=True, allow_unused=True)
                hv = list(got)
            return torch.cat([(h if h is not None else torch.zeros_like(v))[f]
                              for h, v, f in zip(hv, variables, free)]).detach().cpu().numpy()

        op = LinearOperator((rhs.size, rhs.size), matvec=hvp, dtype=np.float64)
        direction = scatter(minres(op, rhs, rtol=1e-12, maxiter=MINRES_ITER)[0])
        del grads
        saved = [v.detach().clone() for v in variables]
        t = min(1.0, _first_crossing(model, x, params, saved, direction))
        crossing = t < 1.0
        for _ in range(HALVINGS):
            with torch.no_grad():
                for v, v0, d in zip(variables, saved, direction):
                    v.copy_(v0 + t * d)
            if crossing or norm(gradient(create_graph=False)) <= (1 - 1e-4 * t) * f0:
                break
            t /= 2
        else:
            with torch.no_grad():
                for v, v0 in zip(variables, saved):
                    v.copy_(v0)
            log.info("polish: no step lowers the residual; stopped")
            break
        kinks.set(masks, s.detach())
        step += 1
    at_bound = int(sum(int((b & m).sum()) for b, m in zip(kinks.bound, masks)))
    end = value()
    if not end <= descended:  # the Newton steps are kept only where they end lower than L-BFGS did
        with torch.no_grad():
            for p, q in zip(params, kept):
                p.copy_(q)
        log.info("polish: the Newton steps ended higher (objective %.12g); the L-BFGS point is kept", end)
        end = value()
    if model is not target:  # written back through the caller's tensors (they may be views into a stack)
        with torch.no_grad():
            for p, q in zip([p for p in target.parameters() if p.requires_grad], params):
                p.copy_(q)
    return PolishResult(step, removed, int(sum(int(m.sum()) for m in masks)) - at_bound, at_bound, residual,
                        start, end, time.perf_counter() - t0)
