"""What produced a run: repcost's version and commit, Python and torch, and the plugins' code.

`provenance()` goes into summary.json. `run_plugin_sources(spec)` goes into the run's config (the top-level
key `plugin_sources`, part of the run's identity), so editing a plugin that a run uses makes its
finished result stale, as editing its config does. Runs that use no plugin have no such key and keep
the identity they always had.
"""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from .registry import ANALYSES, DATASETS, MODELS, imported_plugins

PACKAGE_DIR = Path(__file__).resolve().parent


def repcost_version() -> str:
    """The installed distribution's version (package metadata), or 'unknown' for a bare source tree."""
    try:
        return version("repcost")
    except PackageNotFoundError:
        return "unknown"


def git_commit() -> str:
    """The repcost checkout's HEAD commit (with '-dirty' if modified), or 'unknown' (e.g. an installed wheel).

    Only a git work tree whose src/repcost is this package counts: a wheel installed in a virtual
    environment inside some other repository must not report that repository's commit.
    """
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=PACKAGE_DIR, capture_output=True, text=True, timeout=5).stdout.strip()

    try:
        top = git("rev-parse", "--show-toplevel")
        if not top or (Path(top) / "src" / "repcost").resolve() != PACKAGE_DIR:
            return "unknown"
        sha = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return (sha + ("-dirty" if dirty else "")) if sha else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def source_sha256(module_name: str) -> str | None:
    """sha256 of an imported module's source file (a package: its __init__.py), or None if it has none."""
    path = getattr(sys.modules.get(module_name), "__file__", None)
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except OSError:
        return None


def run_plugin_sources(spec: Any) -> dict[str, str]:
    """{module: sha256 of its source} of a validated run's plugins (sorted): those that registered its model family,
    dataset or analyses, and those its `plugins` key names. Entry-point plugins the run does not use and
    repcost's own modules do not count."""
    modules = [*(spec.plugins or []), MODELS.get(spec.model.name).module, DATASETS.get(spec.data.name).module]
    modules += [ANALYSES.get(n).module for n in spec.analysis.analyses]
    return {m: source_sha256(m) or "no source file" for m in sorted(set(modules))
            if m and m != "repcost" and not m.startswith("repcost.")}


def provenance() -> dict[str, Any]:
    """repcost version and commit, Python and torch versions, and every loaded plugin's module, file and sha256."""
    torch = sys.modules.get("torch")
    plugins = {m: {"file": getattr(sys.modules.get(m), "__file__", None), "sha256": source_sha256(m)}
               for m in sorted(imported_plugins)}
    return {"repcost_version": repcost_version(), "git_commit": git_commit(),
            "python_version": platform.python_version(),
            "torch_version": getattr(torch, "__version__", "not imported"), "plugins": plugins}
