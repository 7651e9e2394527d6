"""Structured-config schemas (`schema`), the composition of a run's config and its resolver (`compose`), messages.

Importing the package loads no torch: every command line imports it before it has parsed its arguments.
"""

from __future__ import annotations

from .compose import compose_config
from .schema import AnalysisConfig, PhaseConfig, RunSpec, TrainConfig, validate

__all__ = ["AnalysisConfig", "PhaseConfig", "RunSpec", "TrainConfig", "compose_config", "validate"]
