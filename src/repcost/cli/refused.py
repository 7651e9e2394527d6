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



def run_dir_override(argv: list[str]) -> str | None:
    """The value of the last `hydra.run.dir=` override in `argv`, or None."""
    values = [a.split("=", 1)[1] for a in argv if a.startswith(("hydra.run.dir=", "+hydra.run.dir=", "++hydra.run.dir="))]
    return values[-1] if values else None


def snapshot(argv: list[str]) -> set[Path] | None:
    """Before Hydra starts: the folders that already exist on the way to the run directory `argv` names
    (resolved; for the default `outputs/runs/<overrides>`, every folder in outputs/runs/ too), or None when the
    run directory itself exists or cannot be known before Hydra resolves it (then nothing is ever removed)."""
    value = run_dir_override(argv)
    if value is not None and "${" in value:
        return None
    if value is None:
        runs = _real(Path.cwd() / "outputs" / "runs")
        before = {_real(p) for p in runs.iterdir() if p.is_dir()} if runs.is_dir() else set()
        return {p for p in (runs / "new").parents if p.is_dir()} | before
    target = Path(value).expanduser()
    if target.exists():
        return None
    return {p for p in _real(target).parents if p.is_dir()}


def _real(path: Path) -> Path:
    """`path` with its symbolic links resolved (Path.resolve raises on a symlink loop; the run's mkdir refuses it)."""
    return Path(os.path.realpath(path))


def forget_refused_run(run_dir: Path, existing: set[Path] | None) -> bool:
    """Remove a refused run's directory if this command created it (`existing` from `snapshot`) and it holds
    nothing but start-up leftovers (`rundir.remove_startup_litter`); then the empty folders above it that the
    command created. Returns whether it removed the run directory."""
    from ..rundir import remove_startup_litter  # only on a refusal: `--help` and the start-up load no torch

    run_dir = _real(run_dir)
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
