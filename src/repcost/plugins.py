"""User plugins: modules of the user's own package that register model families, datasets or analyses.

A plugin module registers with repcost's registries when imported, exactly as repcost's own modules do
(`repcost.registry.MODELS.register(name, Schema)`, `DATASETS.register`). repcost imports plugins
before it validates a config, so a plugin's names are valid in that config. Two ways to name them:

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
import re
import traceback
from importlib.metadata import entry_points
from typing import Any

from omegaconf import ListConfig, OmegaConf

from .errors import ConfigError, RepcostError

ENTRY_POINT_GROUP = "repcost.plugins"
_imported: set[str] = set()


def plugin_names(cfg: Any) -> list[str]:
    """The module names a config's `plugins` key asks for (the config a DictConfig or a plain dict)."""
    names = cfg.get("plugins", None)
    if isinstance(names, ListConfig):
        names = OmegaConf.to_container(names)
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise ConfigError("plugins", names, "a list of importable module names, e.g. [mypkg.repcost_plugin]")
    return names or []


_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def _import(name: str, origin: str) -> None:
    if name in _imported:
        return
    if not _MODULE_NAME.match(name):
        raise ConfigError("plugins", name, "absolute module names (dotted identifiers, e.g. mypkg.repcost_plugin; "
                          "no empty or relative names)") if origin == "config key plugins" else RepcostError(
            f"plugin {name!r} ({origin}) is not an absolute module name; fix the entry point")
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
    _imported.add(name)


@functools.cache
def _load_entry_point_plugins() -> None:
    """Import every module named by an installed package's `repcost.plugins` entry point (once per process)."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _import(ep.value.split(":")[0], f"entry point {ep.name!r} of group {ENTRY_POINT_GROUP}")


def load_plugins(cfg: Any) -> None:
    """Import the entry-point plugins and those a config's `plugins` key lists."""
    _load_entry_point_plugins()
    for name in plugin_names(cfg):
        _import(name, "config key plugins")


def loaded_plugins() -> list[str]:
    """The plugin modules imported in this process (entry points and `plugins` keys), sorted."""
    return sorted(_imported)
