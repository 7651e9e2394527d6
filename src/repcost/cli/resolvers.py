"""OmegaConf resolvers used in configs/ (registered when a CLI module is imported)."""

from __future__ import annotations

import secrets

from omegaconf import OmegaConf


def _uid() -> str:
    """A short random id, so two runs started in the same second never share a directory."""
    return secrets.token_hex(3)


if not OmegaConf.has_resolver("repcost_uid"):
    OmegaConf.register_new_resolver("repcost_uid", _uid, use_cache=True)


def _job_dir(override_dirname: str) -> str:
    """A sweep job's sub-directory: its overrides (so a relaunch lands in the same place), or 'base'."""
    return override_dirname or "base"


if not OmegaConf.has_resolver("repcost_job_dir"):
    OmegaConf.register_new_resolver("repcost_job_dir", _job_dir)
