"""Sweep jobs trained as stacked groups (hydra/launcher=stacked), each written to its own run directory.

Runs whose configs differ only in stackable keys (`identity.STACKABLE_KEYS`: seed, λ, the phases'
learning rates, the model's init scale) are one group; a group is a list of run jobs on the one run
path (`run.train_runs`), so each directory receives exactly what its own single run writes, a
relaunch (stacked or not) resumes or reuses every run by itself, and a sweep can mix stacked and
single results. This module holds the grouping (`stack_key`, `plan_groups`) and the launcher's side
of a group (`stack_key_of_job`, `run_stacked_jobs`).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from ..config import validate
from ..config.schema import RunSpec
from ..errors import RepcostError
from ..identity import STACKABLE_KEYS, without_stackable
from ..rundir import RunDir
from .job import check_experiment, done, job_failed, prepare, write_hydra_files
from .preempt import StopFlag
from .run import train_runs

def stack_key(cfg_dict: dict) -> str | None:
    """What runs stacked in one process must share: the resolved run config without its stackable keys.

    None for a run that cannot be stacked with others (an ensemble, `train.ensemble_size` > 1).
    """
    train = cfg_dict.get("train")
    if isinstance(train, dict) and int(train.get("ensemble_size", 1) or 1) != 1:
        return None
    return json.dumps(without_stackable(cfg_dict), sort_keys=True, default=str)


def _first_difference(a, b, prefix: str = "") -> str:
    """The first key (dotted) whose values differ in two config dicts."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{prefix}{k}.")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{prefix}{i}.")
    return prefix.rstrip(".") or "(the config)"


def plan_groups(keys: Sequence[str | None], max_members: int = 64,
                dirs: Sequence[str] | None = None) -> list[list[int]]:
    """Indices of the jobs to run together: equal keys share a group (None: a job of its own).

    A key's jobs are split into ceil(n / max_members) groups of near-equal size; jobs with the
    same directory never share a group (they would lock each other out). Groups are ordered by
    their first job and keep the jobs' order.
    """
    if max_members < 1:
        raise RepcostError(f"max_members must be at least 1, got {max_members}")
    by_key: dict[str, list[int]] = {}
    groups: list[list[int]] = []
    for i, k in enumerate(keys):
        if k is None:
            groups.append([i])
        else:
            by_key.setdefault(k, []).append(i)
    for idx in by_key.values():
        alone, seen, rest = [], set(), []
        for i in idx:  # a second job in the same directory runs after the group, as a plain job
            d = dirs[i] if dirs is not None else i
            (alone if d in seen else rest).append(i)
            seen.add(d)
        n = math.ceil(len(rest) / max_members)
        size, extra = divmod(len(rest), n)
        at = 0
        for g in range(n):
            take = size + (g < extra)
            groups.append(rest[at:at + take])
            at += take
        groups += [[i] for i in alone]
    return sorted(groups, key=lambda g: g[0])


def run_stacked(specs: Sequence[RunSpec], cfg_dicts: Sequence[dict], run_dirs: Sequence[Path],
                stop_flag: StopFlag | None = None, force: bool = False, on_stale: str = "refuse",
                before_start: Sequence[Callable[[RunDir], None] | None] | None = None) -> list[dict | Exception]:
    """Train runs that differ only in `STACKABLE_KEYS` as one stacked process, each in its own directory.

    Returns, per run, what `run_training` would return for it (its summary; `"reused": True` for a
    finished one; `{"status": "preempted", ...}`) or the exception it would raise (a failed run, a
    directory refused by `open_run` or locked by another process) — one run's failure never stops
    the others. `before_start[i]` runs once run i's directory is ready (the CLI writes `.hydra/`).
    Runs that cannot be stacked together are refused at once (RepcostError naming the first key).
    """
    n = len(specs)
    if not (len(cfg_dicts) == len(run_dirs) == n) or n == 0:
        raise ValueError(f"need one config and one directory per run spec: {n}, {len(cfg_dicts)}, {len(run_dirs)}")
    before_start = list(before_start) if before_start is not None else [None] * n
    keys = [stack_key(c) for c in cfg_dicts]
    if any(k is None for k in keys):
        raise RepcostError("ensemble runs (train.ensemble_size > 1) cannot be stacked with other runs")
    for i in range(1, n):
        if keys[i] != keys[0]:
            diff = _first_difference(without_stackable(cfg_dicts[0]), without_stackable(cfg_dicts[i]))
            raise RepcostError(f"run {i} cannot be stacked with run 0: its {diff} differs; stacked runs may differ "
                               f"only in {', '.join(STACKABLE_KEYS)}")
    return train_runs(specs, cfg_dicts, run_dirs, stop_flag, force=force, on_stale=on_stale, before_start=before_start)


# -- the stacked launcher's jobs (hydra/launcher=stacked) ------------------------------------------
def task_config(config: DictConfig) -> DictConfig:
    """A job's config without its hydra node (what Hydra passes the task function)."""
    task = copy.deepcopy(config)
    with read_write(task), open_dict(task):
        del task["hydra"]
    return task


def stack_key_of_job(config: DictConfig) -> str | None:
    """The stacked launcher's grouping key of a composed sweep job (hydra node included): jobs with equal
    keys train as one stacked process. None: the job runs alone (e.g. its config does not validate, so it
    fails exactly as an unstacked job does)."""
    if config.hydra.job.chdir:  # jobs that change into their own directory cannot share a process
        return None
    HydraConfig.instance().set_config(config)
    try:
        check_experiment(HydraConfig.get())
        cfg = task_config(config)
        validate(cfg)
        run_cfg = OmegaConf.to_container(cfg, resolve=True)
    except Exception:  # any problem shows when the job runs alone
        return None
    return stack_key(run_cfg)


def run_stacked_jobs(configs: list[DictConfig]) -> list[dict]:
    """The stacked launcher's group: sweep jobs (hydra node included, output dirs set) trained as one stacked
    process (`run_stacked`); each job's directory, report, failure record and return value are what
    `job.run_job` and `job.job_failed` give it alone."""
    out: list = [None] * len(configs)
    ready = []  # (index, task config, hydra config, spec, run config, run dir, .hydra writer)
    for i, config in enumerate(configs):
        HydraConfig.instance().set_config(config)
        cfg = task_config(config)
        try:
            spec, run_cfg, run_dir, _ = prepare(cfg)
            ready.append((i, cfg, HydraConfig.instance().cfg, spec, run_cfg, run_dir,
                          write_hydra_files(cfg, HydraConfig.instance().cfg)))
        except Exception as e:
            out[i] = job_failed(e, cfg, HydraConfig.instance().cfg)
    if ready:
        HydraConfig.instance().set_config(configs[ready[0][0]])
        try:
            results = run_stacked([r[3] for r in ready], [r[4] for r in ready], [r[5] for r in ready],
                                  force=bool(ready[0][1].get("force", False)), on_stale="move",
                                  before_start=[r[6] for r in ready])
        except RepcostError as e:
            results = [e] * len(ready)
        for (i, cfg, hydra_cfg, _, _, run_dir, _), r in zip(ready, results):
            HydraConfig.instance().cfg = hydra_cfg
            out[i] = job_failed(r, cfg, hydra_cfg) if isinstance(r, Exception) else done(r, run_dir)
    return out
