"""Structured-config schemas and the validation that runs before any work starts."""

from .compose import compose_config
from .schema import AnalysisConfig, PhaseConfig, RunSpec, TrainConfig, validate

__all__ = ["compose_config", "AnalysisConfig", "PhaseConfig", "RunSpec", "TrainConfig", "validate"]
