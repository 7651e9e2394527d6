"""Model families: one module per family, each registering its class (the builder: `Class(cfg, d_in, d_out, gen)`)
with its config schema."""

from __future__ import annotations

import torch

from ..registry import MODELS
from .base import Hidden, RepModel

__all__ = ["MODELS", "Hidden", "RepModel", "build_model"]


def build_model(cfg, d_in: int, d_out: int, seed: int, x_train: torch.Tensor | None = None) -> RepModel:
    """Build the family named by `cfg.name`, initialised in float64 from `seed` (CPU generator); with the
    training inputs `x_train`, the family's data-dependent initialisation follows (`RepModel.init_from_data`;
    models built only to load a checkpoint into need none)."""
    gen = torch.Generator().manual_seed(int(seed))
    model = MODELS.get(cfg.name).build(cfg, d_in, d_out, gen)
    if x_train is not None:
        model.init_from_data(x_train, gen)
    return model
