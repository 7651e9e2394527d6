"""Compose a run config from Python (notebooks, tests, figure scripts) with Hydra's compose API."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from ..paths import CONFIG_DIR


def compose_config(overrides: Sequence[str] = (), config_dirs: Sequence[str | Path] = ()) -> DictConfig:
    """The config `repcost-train [--config-dir D …] OVERRIDES…` would run (without the hydra node).

    `config_dirs` are the user's own config dirs, searched before repcost's (Hydra's search path).
    """
    from . import resolvers  # noqa: F401  (registers ${repcost_job_dir:})

    extra = []
    if config_dirs:
        paths = ",".join(f"file://{Path(d).expanduser().resolve()}" for d in config_dirs)
        extra.append(f"hydra.searchpath=[{paths}]")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=[*extra, *overrides])
