"""Where runs and sweeps may live: names without path tricks, runs never inside sweeps and sweeps never inside runs.

A run directory is one holding a run's own files (`.hydra/overrides.yaml`, `checkpoint.pt`, `FINISHED`, …); a
sweep root is the directory a multirun writes its jobs under (`hydra.sweep.dir`), recognised by the files the
multirun leaves there (`last_sweep_jobs.txt`, Hydra's `multirun.yaml`, `runs.csv`). A single run planted in a
sweep root would become a bogus job of it (`repcost-collect` lists every run below the root), and a sweep inside a
run would mix its jobs with the run's files, so both are refused before any directory is created.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from omegaconf import DictConfig, OmegaConf

from .errors import ConfigError, RepcostError

SWEEP_MARKERS = ("last_sweep_jobs.txt", "multirun.yaml", "runs.csv")
RUN_MARKERS = (".hydra/overrides.yaml", "checkpoint.pt", "FINISHED", "summary.json")
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.]*)\}")


def check_plain_name(key: str, value: object, names: str = "") -> None:
    """`value` (of config key `key`) must be usable as one directory name: no separators, not `.`/`..`, not empty.
    `names`: the directory key whose path takes the value, said in the error."""
    text = str(value)
    bad = (not text.strip() or text in (".", "..") or "/" in text or "\\" in text or "\0" in text
           or len(text.encode()) > 200)
    if bad:
        raise ConfigError(key, value, "a plain directory name (no path separators or '..', at most 200 bytes)"
                          + (f"; it names {names}" if names else ""))


def is_sweep_root(path: Path) -> bool:
    """Whether `path` holds the files a multirun leaves in its sweep directory."""
    return any((path / m).is_file() for m in SWEEP_MARKERS)


def is_run_dir(path: Path) -> bool:
    """Whether `path` holds a run's own files."""
    return any((path / m).exists() for m in RUN_MARKERS)


def check_place(config: DictConfig, key: str) -> Path:
    """The directory of `key` in a Hydra config, hydra.run.dir (a single run's) or hydra.sweep.dir (a multirun's
    root), as an absolute path; RepcostError unless:
    * the sweep `name`, and every config key `${a.b}` the directory's template takes verbatim, is a plain name, so
      a value such as `name=../../etc` cannot move the directory elsewhere (hydra.* keys, resolvers and keys without
      a value are not checked);
    * it is not empty;
    * a run is not a sweep root nor inside one (unless it is an existing job of the sweep, e.g. `--resume
      SWEEP/JOB`), a sweep not a run directory nor inside one."""
    if OmegaConf.select(config, "name", default=None) is not None:  # the sweep name, whatever the templates say
        check_plain_name("name", config.name)
    section, leaf = key.rsplit(".", 1)
    template = str(OmegaConf.to_container(OmegaConf.select(config, section), resolve=False).get(leaf) or "")
    for k in _INTERPOLATION.findall(template):
        value = None if k.startswith("hydra.") else OmegaConf.select(config, k, default=None)
        if value is not None:
            check_plain_name(k, value, key)
    value, run = OmegaConf.select(config, key, default=None), key == "hydra.run.dir"
    if value is None or not str(value).strip():
        what, default = ("a run", "outputs/runs/…") if run else ("a sweep", "outputs/sweeps/<name>")
        raise RepcostError(f"{key} is empty: {what} needs its own directory (leave the key out for the default "
                           f"{default}, or name a directory)")
    path = Path(os.path.abspath(str(value)))
    job = (path / ".hydra" / "overrides.yaml").is_file()
    for p in [path, *path.parents]:
        if run and is_sweep_root(p) and (p == path or not job):  # a sweep's own job may lie inside it
            kind, why = "a sweep directory", "a single run there would become a bogus job of the sweep"
        elif not run and is_run_dir(p) and not is_sweep_root(p):
            kind, why = "a run directory", "the sweep's jobs would mix with the run's files"
        else:
            continue
        where = "is" if p == path else f"lies inside {p}, which is"
        raise RepcostError(f"{key}={path} {where} {kind}: {why}; choose a directory outside it")
    return path
