"""Compose a run config from Python (notebooks, tests, figure scripts) with Hydra's compose API."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from ..paths import CONFIG_DIR


def compose_config(overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """The config `repcost-train OVERRIDES…` would run (without the hydra node)."""
    from . import resolvers  # noqa: F401  (registers ${repcost_uid:})

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))
