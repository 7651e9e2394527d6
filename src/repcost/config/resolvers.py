"""OmegaConf resolvers used in configs/ (registered when repcost.config.compose or a CLI module is imported)."""

from __future__ import annotations

import hashlib

from omegaconf import OmegaConf


MAX_JOB_DIR = 200  # file systems refuse names over 255 bytes


def _job_dir(override_dirname: str) -> str:
    """A run's directory name (a sweep job's, or a single run's under outputs/runs/): its overrides, so a relaunch
    lands in the same place, or 'base' for none.

    A '/' in a value makes sub-directories, unless a `..` among them would climb out of the sweep dir: then every
    '/' is written %2F. Overrides longer than MAX_JOB_DIR bytes (e.g. a whole `train.phases` list) keep their start and
    end with a digest of the full string, so the name stays unique and stable.
    """
    name = override_dirname or "base"
    if ".." in name.split("/") or name.startswith("/"):  # a value like a/../../x would leave the sweep dir
        name = name.replace("/", "%2F")
    if len(name.encode()) <= MAX_JOB_DIR:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:12]
    return name.encode()[:MAX_JOB_DIR - 14].decode(errors="ignore") + "--" + digest


if not OmegaConf.has_resolver("repcost_job_dir"):
    OmegaConf.register_new_resolver("repcost_job_dir", _job_dir)
