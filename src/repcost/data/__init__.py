"""Datasets: one module per dataset, each registering a loader that returns a DataBundle."""

from __future__ import annotations

from ..registry import DATASETS
from .bundle import DataBundle

__all__ = ["DATASETS", "DataBundle", "load_data"]


def load_data(cfg) -> DataBundle:
    """Build the dataset named by `cfg.name` from its validated config dataclass."""
    return DATASETS.get(cfg.name).build(cfg)
