"""What configs/ composes with: the Hydra group options that come from the schemas and the `${repcost_job_dir:}`
resolver (registered on import); and `compose_config`, a run config composed from Python (notebooks, tests, figure
scripts) with Hydra's compose API, refusing what `repcost-train` refuses (a config dir that is not a directory)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..errors import RepcostError
from ..paths import CONFIG_DIR
from ..registry import DATASETS, MODELS
from .messages import composition_error
from .schema import AnalysisConfig, TrainConfig

MAX_JOB_DIR = 100  # bytes: room for a figure preset's overrides and one more, a line a reader takes in (255 allowed)
_LEGACY_MAX = 200  # the limit earlier sweeps' job directories were named under


def _shortened(name: str, limit: int) -> str:
    """`name`, or past `limit` bytes its start and a digest of the whole, so the name stays unique and stable."""
    if len(name.encode()) <= limit:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:12]
    return name.encode()[:limit - 14].decode(errors="ignore") + "--" + digest


def _job_dir(override_dirname: str, parent: str = "") -> str:
    """A run's directory name (a sweep job's, or a single run's under outputs/runs/): its overrides, so a relaunch
    lands in the same place, or 'base' for none.

    A '/' in a value makes sub-directories, unless a `..` among them would climb out of the sweep dir: then every
    '/' is written %2F. Overrides longer than MAX_JOB_DIR bytes (e.g. a whole `train.phases` list) keep their start and
    end with a digest of the full string (the run's .hydra/overrides.yaml holds them all). A directory in `parent`
    (the sweep dir, outputs/runs) under the uncapped name of the same overrides is kept, so its runs are
    reused.
    """
    name = override_dirname or "base"
    if ".." in name.split("/") or name.startswith("/"):  # a value like a/../../x would leave the sweep dir
        name = name.replace("/", "%2F")
    legacy = _shortened(name, _LEGACY_MAX)
    if parent and len(name.encode()) > MAX_JOB_DIR and os.path.isdir(os.path.join(parent, legacy)):
        return legacy
    return _shortened(name, MAX_JOB_DIR)


OmegaConf.register_new_resolver("repcost_job_dir", _job_dir, replace=True)


def check_config_dirs(dirs: Sequence[str | Path], flag: str = "config dir") -> list[Path]:
    """The user's config dirs as absolute paths; a RepcostError for one that is not a directory (Hydra only warns)."""
    out = [Path(d).expanduser().resolve() for d in dirs]
    for given, d in zip(dirs, out):
        if not d.is_dir():
            raise RepcostError(f"{flag} {given}: not a directory ({'a file' if d.exists() else 'no such path'})")
    return out


def store_schema_defaults() -> None:
    """Hydra group options from the schemas, which are where every default is written: `model=<name>` and
    `data=<name>` for each registered family and dataset, and `analysis_defaults` and `train_defaults`, which
    each analysis and train preset extends. A plugin's family or dataset (imported after composing) brings its own
    YAML in a config dir."""
    store = ConfigStore.instance()
    for group, registry in (("model", MODELS), ("data", DATASETS)):
        for entry in map(registry.get, registry.names()):
            if (entry.module or "").startswith(registry.package):  # a plugin's option is its own YAML
                store.store(group=group, name=entry.name, node=OmegaConf.to_container(OmegaConf.structured(entry.schema)))
    for name, schema in (("analysis_defaults", AnalysisConfig), ("train_defaults", TrainConfig)):
        store.store(name=name, node=OmegaConf.to_container(OmegaConf.structured(schema)))


def compose_config(overrides: Sequence[str] = (), config_dirs: Sequence[str | Path] = ()) -> DictConfig:
    """The config `repcost-train [--config-dir D …] OVERRIDES…` would run (without the hydra node); a RepcostError
    (one line, as repcost-train words it) for what Hydra cannot compose.

    `config_dirs` are the user's own config dirs, searched before repcost's (Hydra's search path).
    """
    store_schema_defaults()
    dirs = [f"file://{d}" for d in check_config_dirs(config_dirs)]
    extra = [f"hydra.searchpath=[{','.join(dirs)}]"] if dirs else []
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            return compose(config_name="config", overrides=[*extra, *overrides])
    except (HydraException, OmegaConfBaseException) as e:
        raise RepcostError(composition_error(e)) from None
