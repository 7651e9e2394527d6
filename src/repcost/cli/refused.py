"""A config refused before training leaves no run directory behind.

Hydra creates the run directory and opens its log file before repcost sees the config, and a run
refused once its directory is locked also leaves `.lock` and `.hydra/`. When such a run is refused
and its directory did not exist before this command, everything in it is this command's: it is
removed, with the empty folders above it that the command created.
A directory that holds anything else (a checkpoint, metrics, results) is never touched.
"""

from __future__ import annotations

import os
from pathlib import Path

_existing: set[Path] | None = None  # what `note` found on the way to this command's run directory


def note(run_dir: Path) -> None:
    """Before Hydra creates the run directory: the folders that already exist on the way to it, or None when it
    exists itself (then nothing is ever removed)."""
    global _existing
    target = Path(os.path.realpath(run_dir))  # (Path.resolve raises on a symlink loop; the run's mkdir refuses it)
    _existing = None if target.exists() else {p for p in target.parents if p.is_dir()}


def forget_refused_run(run_dir: Path) -> bool:
    """Remove a refused run's directory if this command created it (`note`) and it holds
    nothing but start-up leftovers (`rundir.remove_startup_litter`); then the empty folders above it that the
    command created. Returns whether it removed the run directory."""
    from ..rundir import remove_startup_litter  # only on a refusal: `--help` and the start-up load no torch

    run_dir, existing = Path(os.path.realpath(run_dir)), _existing
    if existing is None or run_dir in existing or not run_dir.is_dir() or not remove_startup_litter(run_dir):
        return False
    for parent in run_dir.parents:
        if parent in existing:
            break
        try:
            os.rmdir(parent)  # only an empty folder
        except OSError:
            break
    return True
