"""Structured-config schemas and the validation that runs before any work starts.

The names load on first use (PEP 562): `repcost.config.resolvers`, which every command line imports,
must not pull in the schemas (and torch) before the command has parsed its arguments.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {"compose_config": "compose", "AnalysisConfig": "schema", "PhaseConfig": "schema", "RunSpec": "schema",
          "TrainConfig": "schema", "validate": "schema"}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'repcost.config' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value
