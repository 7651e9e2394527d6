"""Polish: move a trained net towards a critical point of its objective (PhaseConfig.polish).

Units that weight decay has cut off (no output on the data, or no outgoing weight) keep weights that shrink
geometrically but never reach 0, and every one of their pre-activations sits on a kink, where no smooth method
settles. They are removed exactly (`remove_dead_units`): their parameters set to 0, which changes neither the
function on the data nor, beyond that contribution, the objective; they are held there.
Then live units that put pre-activations on the kink z = 0 at data points (Jacot et al. 2022 Prop 1: the minimiser is a
function of the pre-activations, and a kink is part of it) are treated by an active-set augmented Lagrangian: the
certificate's kinks (analysis/clarke.py, its finder and KINK_TOL) are held, z_j(θ) = 0 as equality constraints with the
held entries' output fixed at a·z (a: the leaky slope, 0 for ReLU), the entries released from the kink kept on their
side's piece, and full batch in float64 objective + ν·z + ρ/2·‖z‖² over the held entries is minimised: by damped Newton
steps (`_newton`) on nets of at most NEWTON parameters, whose line search takes every entry not held through the
activation itself (a released entry's piece, extended past its kink, would accept steps that raise the objective), by
L-BFGS (strong Wolfe) on larger ones. After each inner solve (not before: ν starts at 0) the multipliers step (ν += ρz)
and give each held kink its slope s_j = a + ν_j/(∂obj/∂out_j); a kink whose slope leaves [a, 1] is released to the side
the slope points to (above 1: z > 0 lowers the objective), an entry that crossed 0 is held, kinks not held are taken in
(a released one once a solve left it on its kink). The gradient at the slopes clipped to [a, 1] is an element of the
certificate's set, so its norm over the penalty's pull bounds the certificate's Clarke measure: the polish stops once it
is at most TOL, or at its iteration and time budgets, or once two solves in a row take no step, and keeps the point of
least measure (never one of higher objective than it started from). Trained nets often sit near saddles and in weakly
curved valleys (nearly parallel units of one layer merging) where L-BFGS creeps and the measure hardly falls; Newton
leaves them and converges quadratically. What the polish reaches is measured, not promised (docs/usage.md).
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass

import torch

from ..analysis.arrays import float64_inputs, float64_model
from ..analysis.clarke import Slopes, kinked
from ..objective import objective, reg_scale_factor

log = logging.getLogger(__name__)

DEAD = 1e-12  # a unit whose output into the next layer is at most this fraction of its layer's largest is removed
CHUNK = 100  # L-BFGS iterations between time checks
TOL = 1e-7  # the polish stops once the gradient at the multipliers' slopes is at most this fraction of the penalty's pull
RHO = 1e3  # the augmented Lagrangian's first penalty on the held pre-activations (×10 while they do not shrink 4×)
INNER = 200  # L-BFGS iterations (or Newton steps) at most between multiplier updates
RELEASE = 0.1  # a held kink is released once its slope is this far outside [a, 1]
NEWTON = 4000  # nets with at most this many parameters take Newton steps (dense Hessian), larger ones L-BFGS
FLAT = 1e-11  # Newton's least damping, relative to the Hessian's largest diagonal entry (flat directions: symmetries)


@dataclass
class PolishResult:
    """What a polish did: iterations (Newton steps or L-BFGS iterations), units removed, the objective before and after, and its time."""

    iterations: int
    removed: int
    objective_start: float
    objective_end: float
    seconds: float
    clarke: float  # the gradient norm at the multipliers' slopes, relative to the penalty's pull


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
        grads = torch.autograd.grad(u.incoming[units].sum() + u.outgoing[units].sum(), params, allow_unused=True)
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
                d = (out <= DEAD * out.max()) & ~((u.incoming == 0) & (u.outgoing == 0))  # not removed yet
                if d.any():
                    dead.append((u.layer, d))
        if not dead:
            break
        for layer, d in dead:
            removed += int(d.sum())
            with torch.no_grad():
                for p, f, e in zip(params, frozen, _unit_entries(model, layer, d)):
                    p.masked_fill_(e, 0.0)
                    f |= e
    return removed, frozen


def _descend(params: list[torch.Tensor], value, iterations: int, deadline: float) -> int:
    """Full-batch L-BFGS with a strong-Wolfe line search on `value`, CHUNK iterations at a time (a time check between
    chunks), until it stalls, `iterations` or `deadline`; returns the iterations done. Removed units stay at 0: their
    gradient is 0, and so is every direction L-BFGS takes there."""
    opt = torch.optim.LBFGS(params, lr=1.0, history_size=100, line_search_fn="strong_wolfe", tolerance_grad=0.0,
                            tolerance_change=1e-16)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        with torch.enable_grad():
            obj = value()
            obj.backward()
        return obj

    done = 0
    while done < iterations and time.perf_counter() < deadline:
        chunk = min(CHUNK, iterations - done)
        opt.param_groups[0].update(max_iter=chunk, max_eval=2 * chunk)
        opt.step(closure)
        stalled = opt.state[params[0]]["n_iter"] - done < chunk  # it stopped on its own tolerance
        done = opt.state[params[0]]["n_iter"]
        if stalled:
            break
    opt.zero_grad(set_to_none=True)
    return done


class _Call(torch.nn.Module):
    """`fn()` as a module holding `model`, so that torch.func.functional_call evaluates it at other parameters."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, fn) -> torch.Tensor:
        return fn()


def _newton(model, value, merit, iterations: int, deadline: float, fixed: torch.Tensor) -> int:
    """Damped Newton steps on `value` over `model`'s trainable parameters: −(H + μI)⁻¹g with the dense Hessian
    (forward-over-reverse, torch.func) and μ, from the last step's μ/100 (at least FLAT of H's largest diagonal
    entry) up ×10, the least for which Cholesky succeeds (H + μI positive definite, so the step descends; at a
    saddle the least-curved directions take the largest steps out of it), halved until `merit` (`value` where the
    step's model holds) decreases; until no halving does, `iterations` or `deadline`; returns the steps taken.
    Entries `fixed` (flat, in parameter order: removed units) stay where they are: the step is Newton's on the
    others (H's rows and columns of fixed entries are the identity's). It leaves the saddles and weakly curved
    valleys (nearly parallel units merging) where L-BFGS creeps, and converges quadratically at a nondegenerate
    minimum."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    params, call = [p for _, p in named], _Call(model)

    def f(v: torch.Tensor, fn=value) -> torch.Tensor:
        parts = torch.split(v, [p.numel() for p in params])
        return torch.func.functional_call(call, {f"model.{n}": c.view_as(p) for (n, p), c in zip(named, parts)}, (fn,))

    done, mu, eye = 0, 0.0, torch.eye(len(fixed)).to(params[0])
    while done < iterations and time.perf_counter() < deadline:
        v = torch.nn.utils.parameters_to_vector(params).detach()
        g = torch.func.grad(f)(v)
        H = torch.func.vmap(lambda u: torch.func.jvp(torch.func.grad(f), (v,), (u,))[1], chunk_size=256)(eye)
        if not bool(torch.isfinite(H).all()):
            break
        # the last step's damping, lowered (at least a positive floor: ×10 must be able to reach H's scale)
        mu = max(mu / 100, FLAT * float(H.diagonal().abs().max()), torch.finfo(H.dtype).tiny)
        H[fixed], H[:, fixed], g[fixed] = 0.0, 0.0, 0.0
        H += torch.diag(fixed.to(H.dtype))
        while (factor := torch.linalg.cholesky_ex(H + mu * eye))[1] != 0 and mu < 1e300:
            mu *= 10
        if factor[1] != 0:
            break
        step, t, f0 = torch.cholesky_solve(g[:, None], factor[0])[:, 0], 1.0, float(f(v, merit))
        while t >= 1e-12 and float(f(v - t * step, merit)) >= f0:
            t /= 2
        if t < 1e-12:  # no decrease along the step: stalled
            break
        with torch.no_grad():  # in place: the parameters may be views into a stack (ensembles, stacked sweeps)
            for p, c in zip(params, torch.split(v - t * step, [p.numel() for p in params])):
                p.copy_(c.view_as(p))
        done += 1
    return done


class _ActiveSet:
    """The kinked pre-activations' pattern: per activation call, the entries tracked (`track`), those held on the kink
    (`held`, with multipliers `nu`) and the slope of each tracked entry's piece (`slope`: 1 above, the leaky a below
    and on the kink, whose slope comes from `nu`); untracked entries keep the activation itself."""

    def __init__(self, model, x, y, loss, lam, reg_scale):
        self.model, self.x, self.y, self.loss, self.lam, self.reg_scale = model, x, y, loss, lam, reg_scale
        finder = Slopes()
        with torch.no_grad(), finder:
            model(x)
        self.lo = [a for _, a in finder.found]
        self.track = [torch.zeros_like(m) for m, _ in finder.found]
        self.held = [t.clone() for t in self.track]
        self.slope = [torch.full(t.shape, a, dtype=x.dtype, device=x.device) for t, a in zip(self.track, self.lo)]
        self.nu = [torch.zeros_like(s) for s in self.slope]
        self.take_kinks(released=self.track)  # all False: none released yet

    def take_kinks(self, released: list[torch.Tensor]) -> None:
        """The certificate's kinks (live units, data points) not held are held, but for those just `released`."""
        _, masks, _, _ = kinked(self.model, self.x, self.y, self.loss, self.lam, self.reg_scale)
        for i, m in enumerate(masks):
            new = m & ~self.held[i] & ~released[i]
            self.track[i], self.held[i] = self.track[i] | new, self.held[i] | new
            self.slope[i] = torch.where(new, self.lo[i], self.slope[i])

    def run(self, slopes: list[torch.Tensor] | None = None):
        """(objective, Σ‖p‖², mode): every tracked pre-activation on its piece, or (with `slopes`) the held ones at these
        slopes and every other one through the activation itself."""
        masks, s = (self.track, self.slope) if slopes is None else (self.held, slopes)  # else the activation itself
        mode = Slopes(masks, torch.cat([v[t] for v, t in zip(s, masks)]), pieces=True)
        with mode:
            obj, _, sq = objective(self.model, self.x, self.y, self.loss, self.lam, self.reg_scale)
        return obj, sq.detach(), mode

    def lagrangian(self, rho: float, merit: bool = False) -> torch.Tensor:
        """The augmented Lagrangian: the objective on the pattern's pieces (`merit`: every entry not held through the
        activation itself), + ν·z + ρ/2·‖z‖² over the held entries."""
        obj, _, mode = self.run(self.slope if merit else None)
        z = torch.cat([zi[h] for zi, h in zip(mode.inputs, self.held)])
        nu = torch.cat([v[h] for v, h in zip(self.nu, self.held)])
        return obj + (nu * z).sum() + 0.5 * rho * (z * z).sum()

    def update(self, rho: float) -> tuple[float, float, int]:
        """Multipliers stepped, slopes read off them (s = a + ν/(∂obj/∂out)), kinks whose slope leaves [a, 1] released
        to the side it points to, entries that crossed 0 held; returns the held |z| at most (relative to its unit's
        largest |z| over the data), the gradient norm at the slopes
        clipped to [a, 1] (an element of the certificate's set) relative to the penalty's pull, and the kinks held."""
        with torch.enable_grad():
            obj, _, mode = self.run()
            signal = torch.autograd.grad(obj, mode.outputs)
        far, slopes, released = 0.0, [], []
        for i, (z, g) in enumerate(zip(mode.inputs, signal)):
            z, h, lo = z.detach(), self.held[i], self.lo[i]
            scale = z.abs().reshape(-1, z.shape[-1]).amax(0)
            far = max([far] + (z.abs() / scale.clamp_min(1e-300))[h].tolist())
            nu = torch.where(h, self.nu[i] + rho * z, 0.0)
            s = torch.where(g != 0, lo + nu / torch.where(g != 0, g, 1.0), lo)
            up, down = h & (s > 1 + RELEASE), h & (s < lo - RELEASE)
            crossed = self.track[i] & ~h & (((self.slope[i] == 1) & (z < 0)) | ((self.slope[i] != 1) & (z > 0)))
            self.slope[i] = torch.where(up, 1.0, torch.where(down | crossed, lo, self.slope[i]))
            self.held[i] = (h & ~up & ~down) | crossed
            self.nu[i] = torch.where(self.held[i], nu, 0.0)
            slopes.append(s.clamp(lo, 1.0))
            released.append(up | down)
        self.take_kinks(released)
        params = [p for p in self.model.parameters() if p.requires_grad]
        with torch.enable_grad():
            obj, sq, _ = self.run(slopes)
            grad = torch.autograd.grad(obj, params, allow_unused=True)
        pull = 2.0 * self.lam * reg_scale_factor(self.reg_scale, self.model.depth) * math.sqrt(float(sq))
        norm = math.sqrt(sum(float((g * g).sum()) for g in grad if g is not None))
        return far, norm / pull if pull > 0 else norm, sum(int(h.sum()) for h in self.held)


def polish(model, x: torch.Tensor, y: torch.Tensor, loss: str, lam: float, reg_scale: str, iterations: int,
           seconds: float = math.inf) -> PolishResult:
    """Polish `model` in place (module docstring): dead units removed, then the active-set method with at most
    `iterations` iterations in all within `seconds` seconds, until the gradient at the multipliers' slopes is
    at most TOL of the penalty's pull. Runs in float64 on the model's device; the parameters are written back in the
    model's dtype."""
    t0 = time.perf_counter()
    target, model = model, float64_model(model)
    x, y = float64_inputs(model, x, y)
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.no_grad():
        start = float(objective(model, x, y, loss, lam, reg_scale)[0])
    removed, frozen = remove_dead_units(model, x)
    pattern, rho, done, last, stalled = _ActiveSet(model, x, y, loss, lam, reg_scale), RHO, 0, math.inf, False
    best = (pattern.update(0.0)[1], [p.detach().clone() for p in params])  # the least measure at ≤ start, its point
    fixed = torch.cat([f.reshape(-1) for f in frozen]) if sum(p.numel() for p in params) <= NEWTON else None
    while done < iterations and time.perf_counter() < t0 + seconds:
        value, n = (lambda: pattern.lagrangian(rho)), min(INNER, iterations - done)
        steps = _descend(params, value, n, t0 + seconds) if fixed is None else _newton(
            model, value, lambda: pattern.lagrangian(rho, merit=True), n, t0 + seconds, fixed)
        done += steps
        far, measure, held = pattern.update(rho)
        with torch.no_grad():
            obj = float(objective(model, x, y, loss, lam, reg_scale)[0])
        log.info("polish: %d iterations, objective %.12g, %d kinks held (|z| ≤ %.2g), Clarke %.3g", done, obj,
                 held, far, measure)
        if measure < best[0] and obj <= start:
            best = (measure, [p.detach().clone() for p in params])
        if measure <= TOL or (steps == 0 and stalled):  # at the tolerance, or twice no step lowers the Lagrangian
            break
        stalled = steps == 0
        rho = min(rho * 10, RHO * 1e4) if far > max(0.25 * last, 1e-12) else rho
        last = far
    with torch.no_grad():  # written back through the caller's tensors too (they may be views into a stack)
        for p, q, r in zip(params, best[1], [p for p in target.parameters() if p.requires_grad]):
            p.copy_(q)
            r.copy_(q)
        end = float(objective(model, x, y, loss, lam, reg_scale)[0])
    return PolishResult(done, removed, start, end, time.perf_counter() - t0, best[0])
