"""Name -> (config schema, builder) registries for models and datasets.

Each model family and dataset registers itself from its own module, so adding one to the package is one
Python file: its schema's defaults are its Hydra group option (`repcost.config.compose.store_schema_defaults`).
The packages import all their modules on first use.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable

from .errors import PLUGIN_HINT, ConfigError, did_you_mean


@dataclass(frozen=True)
class Entry:
    name: str
    schema: type
    build: Callable[..., Any]

    @property
    def module(self) -> str | None:
        """The module that registered this entry (an analysis: the module of its function)."""
        return getattr(getattr(self.build, "fn", self.build), "__module__", None)


class Registry:
    """A registry of named builders, each with a dataclass schema for its config."""

    def __init__(self, kind: str, package: str):
        self.kind, self.package = kind, package
        self._entries: dict[str, Entry] = {}
        self._loaded = False

    def register(self, name: str, schema: type):
        """Decorator: register `build` under `name` with config dataclass `schema`."""

        def deco(build):
            self._entries[name] = Entry(name, schema, build)
            return build

        return deco

    def _load(self) -> None:
        if not self._loaded:
            pkg = importlib.import_module(self.package)
            for mod in pkgutil.iter_modules(getattr(pkg, "__path__", [])):  # a package: every module in it
                importlib.import_module(f"{self.package}.{mod.name}")
            self._loaded = True

    def declared(self) -> list[str]:
        """The names the package's modules register, read from their source without importing them (so
        `repcost-train --help` lists them without loading torch)."""
        spec = importlib.util.find_spec(self.package)
        sources = [p for d in (spec.submodule_search_locations or []) for p in Path(d).glob("*.py")]
        return sorted({m for p in sources for m in re.findall(r'\.register\(\s*"([^"]+)"', p.read_text())})

    def names(self) -> list[str]:
        """Sorted registered names."""
        self._load()
        return sorted(self._entries)

    def get(self, name: str) -> Entry:
        """The entry for `name`, or a ConfigError listing the known names."""
        self._load()
        if name not in self._entries:
            raise ConfigError(f"{self.kind}.name", name, "one of " + ", ".join(self.names())
                              + did_you_mean(name, self.names()) + "; " + PLUGIN_HINT)
        return self._entries[name]


MODELS = Registry("model", "repcost.models")
DATASETS = Registry("data", "repcost.data")
ANALYSES = Registry("analysis", "repcost.analysis.hooks")
