"""OmegaConf resolvers used in configs/ (registered when a CLI module is imported)."""

from __future__ import annotations

import secrets

from omegaconf import OmegaConf


def _uid() -> str:
    """A short random id, so two runs started in the same second never share a directory."""
    return secrets.token_hex(3)


if not OmegaConf.has_resolver("repcost_uid"):
    OmegaConf.register_new_resolver("repcost_uid", _uid, use_cache=True)
