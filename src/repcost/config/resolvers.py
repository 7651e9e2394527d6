"""OmegaConf resolvers used in configs/ (registered when repcost.config.compose or a CLI module is imported)."""

from __future__ import annotations

import hashlib
import os

from omegaconf import OmegaConf

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


if not OmegaConf.has_resolver("repcost_job_dir"):
    OmegaConf.register_new_resolver("repcost_job_dir", _job_dir)
