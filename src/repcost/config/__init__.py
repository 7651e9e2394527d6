"""Structured-config schemas (`schema`), the composition of a run's config and its resolver (`compose`), messages.

Importing the package loads no torch: every command line imports it before it has parsed its arguments.
"""

from __future__ import annotations

from .compose import compose_config
from .schema import validate

__all__ = ["compose_config", "validate"]
