"""Name -> (config schema, builder) registries for models, datasets and analyses; the user plugins that add to them.

Each model family and dataset registers itself from its own module, so adding one to the package is one
Python file: its schema's defaults are its Hydra group option (`repcost.config.compose.store_schema_defaults`).
The packages import all their modules on first use.

A plugin is a module of the user's own package that registers the same way when imported
(`MODELS.register(name, Schema)`, `DATASETS.register`). repcost imports plugins before it validates a config,
so a plugin's names are valid in that config. Two ways to name them:

- an entry point in the group `repcost.plugins` of an installed package, imported for every run::

      [project.entry-points."repcost.plugins"]
      mine = "mypkg.repcost_plugin"

- a top-level `plugins: [mypkg.repcost_plugin, ...]` in a config: in an experiment preset of the user's
  config dir, or on the command line as `plugins=[mypkg.repcost_plugin]`.

Hydra composes YAML before repcost sees it, so a plugin model or dataset also needs its group file
(`model/<name>.yaml`, `data/<name>.yaml`) in the user's config dir (`--config-dir DIR`); the package's own
are made from their schemas (`config/compose.py`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
import re
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable

from .errors import ConfigError, RepcostError, did_you_mean


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

    def register(self, name: str, schema: type):
        """Decorator: register `build` under `name` with config dataclass `schema`."""

        def deco(build):
            self._entries[name] = Entry(name, schema, build)
            return build

        return deco

    @functools.cache  # once per registry
    def _load(self) -> None:
        pkg = importlib.import_module(self.package)
        for mod in pkgutil.iter_modules(getattr(pkg, "__path__", [])):  # a package: every module in it
            importlib.import_module(f"{self.package}.{mod.name}")

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

    def get(self, name: str, key: str = "") -> Entry:
        """The entry for `name`, or a ConfigError naming `key` (default: `<kind>.name`) and listing the known names."""
        self._load()
        if name not in self._entries:
            raise ConfigError(key or f"{self.kind}.name", name, "one of " + ", ".join(self.names())
                              + did_you_mean(name, self.names()) + "; a plugin's name? load its module with "
                              "plugins=[mypkg.module] (or install it with a repcost.plugins entry point)")
        return self._entries[name]


MODELS = Registry("model", "repcost.models")
DATASETS = Registry("data", "repcost.data")
ANALYSES = Registry("analysis", "repcost.analysis.hooks")


ENTRY_POINT_GROUP = "repcost.plugins"
imported_plugins: set[str] = set()  # the plugin modules imported in this process (entry points and plugins keys)


def _import(name: str, origin: str) -> None:
    if name in imported_plugins:
        return
    if not all(part.isidentifier() for part in name.split(".")):  # (a config's plugins: checked by load_plugins)
        raise RepcostError(f"plugin {name!r} ({origin}) is not an absolute module name; fix the entry point")
    try:
        importlib.import_module(name)
    except ImportError as e:
        # the plugin itself is missing, or something it imports: either way the user's environment to fix
        raise RepcostError(f"cannot import plugin {name!r} ({origin}): {e}; install it or put it on PYTHONPATH") from None
    except SyntaxError as e:
        where = f"{e.filename}, line {e.lineno}" if e.filename else "its source"
        raise RepcostError(f"plugin {name!r} ({origin}) has a syntax error in {where}: {e.msg}; fix the plugin") from None
    except Exception as e:  # the plugin's own code raised while importing: the plugin is the thing to fix
        frames = [f for f in traceback.extract_tb(e.__traceback__) if "importlib" not in f.filename]  # the plugin's
        where = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise RepcostError(f"plugin {name!r} ({origin}) failed while importing{where}: "
                           f"{e.__class__.__name__}: {first}; fix the plugin") from None
    imported_plugins.add(name)


@functools.cache
def _load_entry_point_plugins() -> None:
    """Import every module named by an installed package's `repcost.plugins` entry point (once per process)."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _import(ep.value.split(":")[0], f"entry point {ep.name!r} of group {ENTRY_POINT_GROUP}")


def load_plugins(cfg: Any) -> None:
    """Import the entry-point plugins and those a config's `plugins` key lists (the config a DictConfig or a dict)."""
    _load_entry_point_plugins()
    names = cfg.get("plugins", None)
    if names is not None and (isinstance(names, str) or not isinstance(names, Sequence) or not all(
            isinstance(n, str) and all(p.isidentifier() for p in n.split(".")) for n in names)):
        raise ConfigError("plugins", names, "a list of absolute module names, e.g. [mypkg.repcost_plugin]")
    for name in names or []:
        _import(name, "config key plugins")
