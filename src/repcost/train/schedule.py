"""Learning rate of an optimiser phase at a given step (a pure function, so resuming is exact)."""

from __future__ import annotations

import math


def lr_factor(schedule: str, final_ratio: float, step: int, steps: int) -> float:
    """lr at `step` of a phase of `steps` steps over the phase's lr: 1 (constant), or decaying to final_ratio.

    Every schedule is lr × a factor that does not depend on lr, so members of a stacked grid that
    differ in lr share it (`Engine` multiplies each member's lr by it in float64).
    """
    if schedule == "constant" or steps <= 1:
        return 1.0
    t = min(step / (steps - 1), 1.0)
    if schedule == "cosine":
        return final_ratio + (1 - final_ratio) * 0.5 * (1 + math.cos(math.pi * t))
    if schedule == "linear":
        return 1 - (1 - final_ratio) * t
    return final_ratio**t  # exponential
