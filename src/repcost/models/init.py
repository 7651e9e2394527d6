"""Seeded weight initialisation shared by the model families."""

from __future__ import annotations

import math

import torch
from torch import nn


def gaussian_param(shape, fan_in: int, gain: float, scale: float, gen: torch.Generator) -> nn.Parameter:
    """A float64 parameter ~ N(0, scale²·gain/fan_in) (He init for gain 2), drawn from `gen`."""
    std = scale * math.sqrt(gain / fan_in) if fan_in > 0 else 0.0
    return nn.Parameter(torch.randn(*shape, generator=gen, dtype=torch.float64) * std)


def zeros_param(shape) -> nn.Parameter:
    """A float64 parameter of zeros (biases start at zero)."""
    return nn.Parameter(torch.zeros(*shape, dtype=torch.float64))
