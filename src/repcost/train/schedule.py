"""Learning rate of an optimiser phase at a given step (a pure function, so resuming is exact)."""

from __future__ import annotations

import math


def lr_at(lr: float, schedule: str, final_ratio: float, step: int, steps: int) -> float:
    """lr at `step` of a phase of `steps` steps: constant, or decaying to lr·final_ratio."""
    if schedule == "constant" or steps <= 1:
        return lr
    t = min(step / (steps - 1), 1.0)
    if schedule == "cosine":
        return lr * (final_ratio + (1 - final_ratio) * 0.5 * (1 + math.cos(math.pi * t)))
    if schedule == "linear":
        return lr * (1 - (1 - final_ratio) * t)
    return lr * final_ratio**t  # exponential


def apply_lr(optimizer, phase, step: int) -> float:
    """Set every param group's lr to the phase's schedule at `step`; returns that lr."""
    lr = lr_at(phase.lr, phase.schedule, phase.final_lr_ratio, step, phase.steps)
    for g in optimizer.param_groups:
        g["lr"] = lr
    return lr
