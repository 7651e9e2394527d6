"""Polish: move a trained net towards a critical point of its objective (PhaseConfig.polish).

Units that weight decay has cut off keep weights that shrink geometrically but never reach 0, every pre-activation on
a kink. They are removed exactly (`remove_dead_units`): set to 0, which changes neither the function on the data nor,
beyond their own penalty, the objective, and held there; only the other entries are optimised (W_1 in the data's span).

Live units put pre-activations on the kink z = 0 at data points too (Jacot et al. 2022 Prop 1: a kink is part of the
minimiser), and on the way to a critical point many more cross it. A smoothing continuation crosses them first (Chen
2012, "Smoothing methods for nonsmooth, nonconvex minimization": the smoothed problems' critical points tend to Clarke
critical points): each kink becomes a softplus of width WIDTHS × its unit's largest |z| over the data, and full-batch
float64 L-BFGS (`_descend`) minimises to about each width's own accuracy in turn, each stage (widths, active set) in an
equal share of the time left. A point on a kink ends within a few widths of it: kinked for the certificate
(clarke.KINK_TOL). An active-set augmented Lagrangian finishes: the certificate's kinks held, z_j(θ) = 0 with output a·z
(a: the leaky slope, 0 for ReLU), entries released from a kink kept on their side's piece, objective + ν·z + ρ/2·‖z‖²
over the held entries minimised by damped Newton steps (`_newton`; L-BFGS above NEWTON free entries). After each solve
ν += ρz gives each held kink its slope s_j = a + ν_j/(∂obj/∂out_j); a kink whose slope leaves [a, 1] is released to that
side, an entry that crossed 0 held. Against cycling, a solve ended on a kink releases nothing; a kink is released again
only after a stalled solve.

Every point, the start included, is rated by the certificate's least norm over its set (beyond EXACT_KINKS kinks: the
gradient at the multipliers' slopes clipped to [a, 1]) over the penalty's pull. The polish stops at its tolerance (a
start there takes no iteration), at its budgets (L-BFGS iterations and Newton steps in all; seconds) or once two
solves in a row take no step, keeps the point of least measure, never one above the starting objective, and
promises nothing: what it reaches is measured (docs/usage.md).
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..analysis.arrays import float64_inputs
from ..analysis.clarke import EXACT_KINKS, Slopes, clarke_gradient_norm, kinked
from ..objective import objective, reg_scale_factor

log = logging.getLogger(__name__)

DEAD = 1e-12  # a unit whose output into the next layer is at most this fraction of its layer's largest is removed
RHO = 1e3  # the augmented Lagrangian's first penalty on the held pre-activations (×10 while they do not shrink 4×)
INNER = 200  # L-BFGS iterations (or Newton steps) at most between multiplier updates
RELEASE = 0.1  # a held kink is released once its slope is this far outside [a, 1]
NEWTON = 4000  # with at most this many free parameters the active set takes Newton steps (dense Hessian), else L-BFGS
FLAT = 1e-11  # Newton's least damping, relative to the Hessian's largest diagonal entry (flat directions: symmetries)
WIDTHS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7)  # the smoothing's widths, relative to each unit's largest |z| over the data


@dataclass
class PolishResult:
    """What a polish did: iterations (L-BFGS and Newton), units removed, the objective before and after, its time."""

    iterations: int
    removed: int
    objective_start: float
    objective_end: float
    seconds: float
    clarke: float  # the measure at the point kept (module docstring)


def _unit_entries(model, layer: int, units: torch.Tensor) -> list[torch.Tensor]:
    """Per parameter, the entries that hidden layer `layer`'s `units` own (incoming or outgoing), read off as the
    support of the gradient of their norms at all-ones parameters (the protocol's `unit_norms`, nothing else)."""
    ones = copy.deepcopy(model)
    params = [p for p in ones.parameters() if p.requires_grad]
    with torch.no_grad():
        for p in params:
            p.fill_(1.0)
    with torch.enable_grad():
        u = next(u for u in ones.unit_norms() if u.layer == layer)
        grads = torch.autograd.grad(u.incoming[units].sum() + u.outgoing[units].sum(), params, materialize_grads=True)
    return [g != 0 for g in grads]


def remove_dead_units(model, x: torch.Tensor) -> tuple[int, list[torch.Tensor]]:
    """Set to 0 every unit (of `unit_norms`) whose output into the next layer (‖σ(z_k)‖ over the data times its
    outgoing norm) is at most DEAD times its layer's largest, until none is left; returns how many and, per
    parameter, the entries at 0 (those of units already there too, e.g. merged ones)."""
    params = [p for p in model.parameters() if p.requires_grad]
    frozen = [torch.zeros_like(p, dtype=torch.bool) for p in params]
    removed = 0
    while model.structure.unit_rescaling:
        found = 0
        with torch.no_grad():
            hs = model.hidden(x)
            for u in model.unit_norms():  # all read before any unit is set to 0
                out = hs[u.layer - 1].post.norm(dim=0) * u.outgoing.sqrt()
                d = out <= DEAD * out.max()
                found += int((d & ~((u.incoming == 0) & (u.outgoing == 0))).sum())  # not at 0 yet
                for p, f, e in zip(params, frozen, _unit_entries(model, u.layer, d) if d.any() else []):
                    p.masked_fill_(e, 0.0)
                    f |= e
        if not found:
            break
        removed += found
    return removed, frozen


def _write(params, v: torch.Tensor) -> None:
    """The flat `v` written into `params` in place: they may be views into a stack (ensembles, stacked sweeps)."""
    with torch.no_grad():
        for p, c in zip(params, v.to(params[0]).split([p.numel() for p in params])):
            p.copy_(c.view_as(p))


def _descend(params: list[torch.Tensor], value, iterations: int, deadline: float, at: torch.Tensor,
             tol: float = 0.0) -> int:
    """Full-batch L-BFGS (scipy's L-BFGS-B) on `value` over the parameters' free entries (flat indices `at`), until no
    step lowers it, no gradient entry is above `tol`, `iterations` or `deadline`; returns the iterations."""
    from scipy.optimize import minimize  # scipy loads where a polish needs it

    full = torch.nn.utils.parameters_to_vector(params).detach()

    def value_and_grad(w) -> tuple[float, np.ndarray]:
        _write(params, full.index_copy(0, at, torch.as_tensor(w).to(full)))
        with torch.enable_grad():
            obj = value()
            grads = torch.autograd.grad(obj, params, materialize_grads=True)
        return float(obj.detach()), torch.cat([g.reshape(-1) for g in grads])[at].cpu().numpy()

    def on_time(_) -> None:
        if time.perf_counter() > deadline:
            raise StopIteration

    if iterations <= 0:
        return 0
    r = minimize(value_and_grad, full[at].cpu().numpy(), jac=True, method="L-BFGS-B", callback=on_time,
                 options={"maxiter": iterations, "maxfun": 2 * iterations, "maxcor": 50, "ftol": 0.0, "gtol": tol})
    _write(params, full.index_copy(0, at, torch.as_tensor(r.x).to(full)))
    return int(r.nit)


def _newton(pattern, rho: float, iterations: int, deadline: float, at: torch.Tensor) -> tuple[int, bool]:
    """Damped Newton steps on `pattern`'s Lagrangian at penalty `rho`: −(H + μI)⁻¹g, dense H (torch.func), μ from the
    last step's μ/100 up ×10 until Cholesky succeeds (the step descends; at a saddle the least-curved directions take
    the largest steps), halved until the merit (every entry not held through the activation itself) decreases. A full
    step that crosses a kink without lowering the merit is cut to that kink (bisection), ending the solve. Until no
    halving lowers the merit, `iterations` or `deadline`; returns the steps and whether the solve ended on a kink.
    Only the free entries (flat indices `at`) move."""
    names, params = zip(*[(n, p) for n, p in pattern.named_parameters() if p.requires_grad])
    full = torch.nn.utils.parameters_to_vector(params).detach()

    def f(v: torch.Tensor, *call) -> torch.Tensor:  # `pattern`'s method `call` (default: the Lagrangian) at `v`
        parts = torch.split(full.index_copy(0, at, v), [p.numel() for p in params])
        return torch.func.functional_call(pattern, {n: c.view_as(p) for n, p, c in zip(names, params, parts)},
                                          call or (pattern.lagrangian, rho))

    done, mu, v = 0, 0.0, full[at]
    eye, merit, sides = torch.eye(len(at)).to(v), (pattern.lagrangian, rho, True), (pattern.sides,)
    while done < iterations and time.perf_counter() < deadline:
        g = torch.func.grad(f)(v)
        H = torch.func.vmap(lambda u: torch.func.jvp(torch.func.grad(f), (v,), (u,))[1], chunk_size=256)(eye)
        if not bool(torch.isfinite(H).all()):
            break
        # the last step's damping, lowered (at least a positive floor: ×10 must be able to reach H's scale)
        mu = max(mu / 100, FLAT * float(H.diagonal().abs().max()), torch.finfo(H.dtype).tiny)
        while (factor := torch.linalg.cholesky_ex(H + mu * eye))[1] != 0 and mu < 1e300:
            mu *= 10
        if factor[1] != 0:
            break
        step = torch.cholesky_solve(g[:, None], factor[0])[:, 0]
        t, f0, side, a = 1.0, float(f(v, *merit)), f(v, *sides), 0.0
        if float(f(v - step, *merit)) >= f0 and not torch.equal(f(v - step, *sides), side):
            b = 1.0  # the full step crosses a kink and does not descend: to the first kink it crosses (bisection)
            while b - a > 1e-12:
                a, b = ((a + b) / 2, b) if torch.equal(f(v - (a + b) / 2 * step, *sides), side) else (a, (a + b) / 2)
            if not float(f(v - a * step, *merit)) < f0:  # no decrease up to that kink: halved from the full step
                a = 0.0
            t = a or 1.0
        while t >= 1e-12 and float(f(v - t * step, *merit)) >= f0:
            t /= 2
        if t < 1e-12:  # no decrease along the step: stalled
            break
        v = v - t * step
        _write(params, full.index_copy(0, at, v))
        done += 1
        if a > 0:  # on a kink the pattern does not hold: the update takes it in
            return done, True
    return done, False


class _ActiveSet(torch.nn.Module):
    """The kinked pre-activations' pattern, per activation call: the entries held on the kink (`held`, multipliers
    `nu`), those ever released (`freed`), each one's piece's slope (`slope`); the others keep the activation itself."""

    def __init__(self, model, x, y, loss, lam, reg_scale):
        super().__init__()
        self.model, self.x, self.y, self.loss, self.lam, self.reg_scale = model, x, y, loss, lam, reg_scale
        finder = kinked(model, x, y, loss, lam, reg_scale)[4]
        found, self.scales = finder.found, finder.scales  # per activation call: shape and least slope; unit scales
        self.lo = [a for _, a in found]
        self.held = [torch.zeros_like(m) for m, _ in found]
        self.freed = [h.clone() for h in self.held]
        self.slope = [torch.full(h.shape, a, dtype=x.dtype, device=x.device) for h, a in zip(self.held, self.lo)]
        self.nu = [torch.zeros_like(s) for s in self.slope]

    def run(self, slopes: list[torch.Tensor] | None = None):
        """(objective, Σ‖p‖², mode): held and released entries on their pieces, or held ones at `slopes` (others: σ)."""
        pieces = [h | f for h, f in zip(self.held, self.freed)]
        masks, s = (pieces, self.slope) if slopes is None else (self.held, slopes)  # else the activation itself
        mode = Slopes(masks, torch.cat([v[t] for v, t in zip(s, masks)]), pieces=True)
        with mode:
            obj, _, sq = objective(self.model, self.x, self.y, self.loss, self.lam, self.reg_scale)
        return obj, sq.detach(), mode

    def forward(self, method, *args):  # torch.func.functional_call evaluates `method` at other parameters (`_newton`)
        return method(*args)

    def sides(self) -> torch.Tensor:
        """Which entries not held lie above their kink (z > 0), flat: a step that changes it crosses a kink."""
        with torch.no_grad():
            return torch.cat([(z > 0)[~h] for z, h in zip(self.run()[2].inputs, self.held)])

    def lagrangian(self, rho: float, merit: bool = False) -> torch.Tensor:
        """The augmented Lagrangian: the objective on the pattern's pieces (`merit`: every entry not held through the
        activation itself), + ν·z + ρ/2·‖z‖² over the held entries."""
        obj, _, mode = self.run(self.slope if merit else None)
        z = torch.cat([zi[h] for zi, h in zip(mode.inputs, self.held)])
        nu = torch.cat([v[h] for v, h in zip(self.nu, self.held)])
        return obj + (nu * z).sum() + 0.5 * rho * (z * z).sum()

    def update(self, rho: float, release: bool = True, again: bool = False) -> tuple[float, float, int]:
        """Multipliers stepped, slopes read off them, kinks released (with `release`; one released before only `again`)
        and held (module docstring); returns the held |z| at most (relative to its unit's largest), the gradient norm at
        the slopes clipped to [a, 1] over the penalty's pull (`pull`), and the kinks held."""
        with torch.enable_grad():
            obj, _, mode = self.run()
            signal = torch.autograd.grad(obj, mode.outputs)
        far, slopes, masks = 0.0, [], kinked(self.model, self.x, self.y, self.loss, self.lam, self.reg_scale)[1]
        for i, (z, g) in enumerate(zip(mode.inputs, signal)):
            z, h, lo = z.detach(), self.held[i], self.lo[i]
            scale = z.abs().reshape(-1, z.shape[-1]).amax(0)
            far = max([far] + (z.abs() / scale.clamp_min(1e-300))[h].tolist())
            nu = torch.where(h, self.nu[i] + rho * z, 0.0)
            s = torch.where(g != 0, lo + nu / torch.where(g != 0, g, 1.0), lo)
            free = h & release & (again | ~self.freed[i])
            up, down = free & (s > 1 + RELEASE), free & (s < lo - RELEASE)
            self.freed[i] |= up | down
            crossed = self.freed[i] & ~h & (((self.slope[i] == 1) & (z < 0)) | ((self.slope[i] != 1) & (z > 0)))
            new = masks[i] & ~h  # the certificate's kinks (live units, data points) not held (not those just released)
            self.slope[i] = torch.where(up, 1.0, torch.where(down | crossed | new, lo, self.slope[i]))
            self.held[i] = (h & ~up & ~down) | crossed | new
            self.nu[i] = torch.where(self.held[i], nu, 0.0)
            slopes.append(s.clamp(lo, 1.0))
        params = [p for p in self.model.parameters() if p.requires_grad]
        with torch.enable_grad():
            obj, sq, _ = self.run(slopes)
            grad = torch.autograd.grad(obj, params, allow_unused=True)
        self.pull = 2.0 * self.lam * reg_scale_factor(self.reg_scale, self.model.depth) * math.sqrt(float(sq))
        norm = math.sqrt(sum(float((g * g).sum()) for g in grad if g is not None))
        return far, norm / (self.pull or 1.0), sum(int(h.sum()) for h in self.held)


def polish(model, x: torch.Tensor, y: torch.Tensor, loss: str, lam: float, reg_scale: str, iterations: int,
           seconds: float, tol: float) -> PolishResult:
    """Polish `model` in place (module docstring): dead units removed, the smoothing's widths, then the active set,
    with at most `iterations` L-BFGS iterations and Newton steps in all within `seconds` seconds, until the measure is at
    most `tol`. Runs in float64 on the model's device; the parameters are written back in the model's dtype."""
    t0 = time.perf_counter()
    target, model = model, copy.deepcopy(model).to(torch.float64)  # a copy: W_1 may change shape (below)
    x, y = float64_inputs(model, x, y)
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.no_grad():
        start = float(objective(model, x, y, loss, lam, reg_scale)[0])
    removed, frozen = remove_dead_units(model, x)
    # W_1 meets the data only in their span: polished in its coordinates (x Q, W_1 Q), dropping W_1's part outside it
    # (penalty only, 0 at a critical point) and most of L-BFGS-B's work where inputs outnumber points (MNIST)
    first, (_, sv, basis) = model.weight_matrices()[0], torch.linalg.svd(x, full_matrices=False)
    span = basis[sv > sv[0] * max(x.shape) * torch.finfo(x.dtype).eps].T
    i = next((i for i, p in enumerate(params) if p is first), None)
    if span.shape[1] == x.shape[1] or i is None:
        span = None
    else:
        frozen[i] = frozen[i].all(-1, keepdim=True).expand(*first.shape[:-1], span.shape[1])
        x, first.data = x @ span, first.data @ span
    at = (~torch.cat([f.reshape(-1) for f in frozen])).nonzero()[:, 0]  # the free entries
    widths, rho, done, last, stalled, best = [], RHO, 0, math.inf, False, (math.inf, [])

    def keep(element: float, where: str) -> float:
        """The point's measure (module docstring), logged; the point kept if least so far at an objective ≤ start's."""
        nonlocal best
        least = clarke_gradient_norm(model, x, y, loss, lam, reg_scale, max_kinks=EXACT_KINKS)[0]  # NaN beyond
        measure = element if math.isnan(least) else least / (pattern.pull or 1.0)
        with torch.no_grad():
            obj = float(objective(model, x, y, loss, lam, reg_scale)[0])
        log.info("polish: %s, %d iterations, objective %.12g, Clarke %.3g", where, done, obj, measure)
        if measure < best[0] and (obj <= start or not best[1]):
            best = (measure, [p.detach().clone() for p in params])
        return measure

    def smoothed() -> torch.Tensor:  # the objective with the kinks smoothed
        with Slopes(widths=widths):
            return objective(model, x, y, loss, lam, reg_scale)[0]
    pattern = _ActiveSet(model, x, y, loss, lam, reg_scale)
    keep(pattern.update(0.0)[1], "start")
    for k, width in enumerate(WIDTHS):
        if best[0] <= tol or done >= iterations or time.perf_counter() > t0 + seconds:
            break
        widths, share = [width * s for s in pattern.scales], (t0 + seconds - time.perf_counter()) / (len(WIDTHS) + 1 - k)
        done += _descend(params, smoothed, iterations - done, time.perf_counter() + share, at, width * pattern.pull)
        pattern = _ActiveSet(model, x, y, loss, lam, reg_scale)
        keep(pattern.update(0.0)[1], f"smoothed to width {width:g}")
    while best[0] > tol and done < iterations and time.perf_counter() < t0 + seconds:
        value, n = (lambda: pattern.lagrangian(rho)), min(INNER, iterations - done)
        steps, blocked = (_descend(params, value, n, t0 + seconds, at), False) if len(at) > NEWTON else _newton(
            pattern, rho, n, t0 + seconds, at)
        done += steps
        far, element, held = pattern.update(rho, release=not blocked, again=steps == 0)
        if keep(element, f"{held} kinks held (|z| ≤ {far:.2g})") <= tol or (steps == 0 and stalled):
            break  # at the tolerance, or twice no step lowers the Lagrangian
        rho = min(rho * 10, RHO * 1e4) if not blocked and far > max(0.25 * last, 1e-12) else rho
        stalled, last = steps == 0, last if blocked else far
    with torch.no_grad():  # written back through the caller's tensors too (they may be views into a stack)
        for p, q, r in zip(params, best[1], [p for p in target.parameters() if p.requires_grad]):
            p.copy_(q)
            r.copy_(q if span is None or p is not first else q @ span.T)
        end = float(objective(model, x, y, loss, lam, reg_scale)[0])
    return PolishResult(done, removed, start, end, time.perf_counter() - t0, best[0])
