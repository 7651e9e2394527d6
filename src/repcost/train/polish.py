"""Polish: move a trained net towards a critical point of its objective (PhaseConfig.polish).

Units that weight decay has cut off (no output on the data, or no outgoing weight) keep weights that shrink
geometrically but never reach 0, and every one of their pre-activations sits on a kink, where no smooth method
settles. They are removed exactly (`remove_dead_units`): their parameters set to 0, which changes neither the
function on the data nor, beyond that contribution, the objective; their gradient is then 0, so they stay there.
Then full-batch L-BFGS with a strong-Wolfe line search runs in float64 until it stalls (or its iteration and time
budgets end).

Live units that put pre-activations on the kink z = 0 at data points (Jacot et al. 2022 Prop 1: the minimiser is
a function of the pre-activations, and a kink is part of it) are not treated here: the critical-point certificate
measures them (analysis/clarke.py). What the polish reaches is measured, not promised (docs/usage.md).
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass

import torch

from ..analysis.arrays import float64_inputs, float64_model
from ..objective import objective

log = logging.getLogger(__name__)

DEAD = 1e-12  # a unit whose output into the next layer is at most this fraction of its layer's largest is removed
CHUNK = 100  # L-BFGS iterations between progress lines and time checks


@dataclass
class PolishResult:
    """What a polish did: L-BFGS iterations, units removed, the objective before and after, and its time."""

    iterations: int
    removed: int
    objective_start: float
    objective_end: float
    seconds: float


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
    """Full-batch L-BFGS with a strong-Wolfe line search, CHUNK iterations at a time (a progress line and a time check
    between chunks), until it stalls, `iterations` or `deadline`; returns the iterations done. Removed units stay at 0:
    their gradient is 0."""
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
        with torch.no_grad():
            log.info("polish: %d L-BFGS iterations, objective %.12g", done, float(value()))
        if stalled:
            break
    opt.zero_grad(set_to_none=True)
    return done


def polish(model, x: torch.Tensor, y: torch.Tensor, loss: str, lam: float, reg_scale: str, iterations: int,
           seconds: float = math.inf) -> PolishResult:
    """Polish `model` in place (module docstring): dead units removed, then at most `iterations` L-BFGS iterations
    within `seconds` seconds. Runs in float64 on the model's device; the parameters are written back in the model's
    dtype."""
    t0 = time.perf_counter()
    target, model = model, float64_model(model)
    x, y = float64_inputs(model, x, y)
    params = [p for p in model.parameters() if p.requires_grad]

    def value() -> torch.Tensor:
        return objective(model, x, y, loss, lam, reg_scale)[0]

    with torch.no_grad():
        start = float(value())
    removed, _ = remove_dead_units(model, x)
    done = _descend(params, value, iterations, t0 + seconds)
    with torch.no_grad():
        end = float(value())
    if model is not target:  # written back through the caller's tensors (they may be views into a stack)
        with torch.no_grad():
            for p, q in zip([p for p in target.parameters() if p.requires_grad], params):
                p.copy_(q)
    return PolishResult(done, removed, start, end, time.perf_counter() - t0)
