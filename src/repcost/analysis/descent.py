"""How much lower can the objective go from here? Full-batch L-BFGS from a model's parameters, on a copy.

The gradient certificate (critical.py) cannot tell a point that sits at a nonsmooth local minimum
(pre-activations on ReLU kinks: the gradient does not vanish, but no direction descends) from one in a
shallow, ill-conditioned valley that first-order steps cross slowly. A quasi-Newton method separates
the two: started from the model's parameters, torch.optim.LBFGS (strong-Wolfe line search, so the
objective never rises) on the model's own objective either stalls at once, or keeps descending. The
relative decrease it finds in a given number of objective evaluations (each one forward and backward
pass over the training set; the budget, so the cost is known in advance) is a lower bound on how far above a local
minimum the model is; it is not a proof of minimality when small. Runs in float64 on a deep copy: the
caller's model is never modified.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from ..objective import objective
from .arrays import float64_inputs

HISTORY = 50  # L-BFGS curvature pairs kept


def lbfgs_descent(model, x: torch.Tensor, y: torch.Tensor, loss: str, lam: float, reg_scale: str, evals: int,
                  every: int | None = None,
                  on_progress: Callable[[int, torch.nn.Module, float], None] | None = None) -> dict[str, float]:
    """{objective_start, objective_end, descent_rel}: L-BFGS with `evals` objective evaluations on a float64 copy.

    `descent_rel` = (start − end) / |start|. With `on_progress`, it is called as
    on_progress(evaluations done, the copy, its objective) every `every` evaluations (one L-BFGS history
    throughout).
    """
    if evals < 1:
        raise ValueError(f"evals must be >= 1, got {evals}")
    m = copy.deepcopy(model).to(torch.float64)
    xd, yd = float64_inputs(m, x, y)
    params = [p for p in m.parameters() if p.requires_grad]
    chunk = min(every or evals, evals) if on_progress is not None else evals  # evaluations between reports
    # max_iter = max_eval: the evaluation budget binds (an iteration takes one evaluation or more); no other stop
    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=chunk, max_eval=chunk, history_size=HISTORY,
                            line_search_fn="strong_wolfe", tolerance_grad=0.0, tolerance_change=0.0)

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
        # stop at the next report
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
