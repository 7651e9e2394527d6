"""Model families: one module per family, each registering a builder and its config schema."""

from __future__ import annotations

import torch

from ..registry import MODELS
from .base import Hidden, RepModel

__all__ = ["MODELS", "Hidden", "RepModel", "build_model"]


def build_model(cfg, d_in: int, d_out: int, seed: int) -> RepModel:
    """Build the family named by `cfg.name`, initialised in float64 from `seed` (CPU generator)."""
    gen = torch.Generator().manual_seed(int(seed))
    return MODELS.get(cfg.name).build(cfg, d_in, d_out, gen)
