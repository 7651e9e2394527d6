"""The stacked launcher's work: compose every job, group them, run each group (here, in processes, or submitit).

Every job goes through Hydra's own `run_job` (output dir, HydraConfig, logging, callbacks, JobReturn). A group of
several jobs nests them: job k's task function starts job k+1's `run_job`, and the innermost trains the whole
group as one process (`repcost.train.job.run_hydra_jobs`); each job then returns its own outcome.
"""

from __future__ import annotations

import copy
import logging
import math
import os
from pathlib import Path
from typing import Any, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from repcost.errors import RepcostError

log = logging.getLogger(__name__)
SUBMITIT_CLUSTERS = ("local", "slurm")


def _options(params: dict) -> dict:
    """The launcher's options (their keys and types checked by Hydra against `config.StackedLauncherConf`), their
    values checked: a bad one is a RepcostError (one line, exit 2)."""
    opts = {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v for k, v in params.items()}
    if opts["max_members"] < 1:
        raise RepcostError(f"hydra.launcher.max_members={opts['max_members']}: must be a positive integer "
                           "(the most runs in one stacked process)")
    if opts["n_jobs"] == 0 or opts["n_jobs"] < -1:
        raise RepcostError(f"hydra.launcher.n_jobs={opts['n_jobs']}: must be a positive integer or -1 (one per core)")
    if opts["submitit"] not in (None, *SUBMITIT_CLUSTERS):
        raise RepcostError(f"hydra.launcher.submitit={opts['submitit']}: allowed: null (run here), "
                           f"{', '.join(SUBMITIT_CLUSTERS)}")
    return opts


def stack_key_of_job(config: DictConfig) -> str | None:
    """The grouping key of a composed sweep job (hydra node included, its HydraConfig current): jobs with equal
    keys train as one stacked process. None: the job runs alone (e.g. its config does not validate, so it fails
    exactly as an unstacked job does)."""
    from repcost.config import validate
    from repcost.identity import stack_key

    if config.hydra.job.chdir:  # jobs that change into their own directory cannot share a process
        return None
    try:
        cfg = copy.deepcopy(config)
        with read_write(cfg), open_dict(cfg):
            del cfg["hydra"]
        validate(cfg)
        return stack_key(OmegaConf.to_container(cfg, resolve=True))
    except Exception:  # any problem shows when the job runs alone
        return None


def plan_groups(keys: Sequence[str | None], max_members: int = 64,
                dirs: Sequence[str] | None = None) -> list[list[int]]:
    """Indices of the jobs to run together: equal keys share a group (None: a job of its own).

    A key's jobs are split into ceil(n / max_members) groups of near-equal size; jobs with the
    same directory never share a group (they would lock each other out). Groups are ordered by
    their first job and keep the jobs' order.
    """
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


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
    setup_globals()
    assert launcher.config is not None and launcher.hydra_context is not None and launcher.task_function is not None
    opts = _options(launcher.params)
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    Path(str(config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)

    configs = []
    for idx, overrides in enumerate(job_overrides):
        num = initial_job_idx + idx
        sweep_config = launcher.hydra_context.config_loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = num
            sweep_config.hydra.job.num = num
        configs.append(sweep_config)
    orig, keys, dirs = HydraConfig.instance().cfg, [], []
    try:
        for c in configs:  # the job's output dir (hydra.sweep.dir/subdir) as `run_job` resolves it
            HydraConfig.instance().set_config(c)
            dirs.append(os.path.abspath(os.path.join(str(c.hydra.sweep.dir), str(c.hydra.sweep.subdir))))
            keys.append(stack_key_of_job(c))
    finally:
        HydraConfig.instance().cfg = orig
    groups = plan_groups(keys, opts["max_members"], dirs)
    log.info(f"Launching {len(configs)} jobs as {len(groups)} stacked group(s), sweep output dir: "
             f"{config.hydra.sweep.dir}")
    for g in groups:
        log.info("\t" + " | ".join(f"#{initial_job_idx + i} : {' '.join(filter_overrides(job_overrides[i]))}"
                                   for i in g))
    group_configs = [[configs[i] for i in g] for g in groups]
    if opts["submitit"] is not None:
        results = _run_submitit(launcher, opts, group_configs)
    elif opts["n_jobs"] == 1 or len(groups) == 1:
        results = []
        for gc in group_configs:  # one after another in this process (signals reach the training directly)
            results.append(run_group(gc, launcher.hydra_context, launcher.task_function))
            configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    else:
        from joblib import Parallel, delayed  # hydra-joblib-launcher's dependency

        state = Singleton.get_state()
        results = Parallel(n_jobs=opts["n_jobs"], backend="loky")(
            delayed(run_group)(gc, launcher.hydra_context, launcher.task_function, state) for gc in group_configs)
    runs: list[Any] = [None] * len(configs)
    for g, rets in zip(groups, results):
        for i, r in zip(g, rets):
            runs[i] = r
    return runs


def run_group(configs: list[DictConfig], hydra_context: HydraContext, task_function: TaskFunction,
              singleton_state: dict | None = None) -> list[JobReturn]:
    """Run one group: a single job as Hydra runs it, several as one stacked process (`_run_stacked`)."""
    if singleton_state is not None:  # in another process (joblib, submitit): Hydra's globals first
        setup_globals()
        Singleton.set_state(singleton_state)
    if len(configs) == 1:
        return [_run_job(configs[0], hydra_context, task_function)]
    return _run_stacked(configs, hydra_context)


def _run_stacked(configs: list[DictConfig], hydra_context: HydraContext) -> list[JobReturn]:
    """Hydra's `run_job` for every job of the group, nested: job k's task function runs job k+1, and the innermost
    trains all of them at once; each job's task function then returns that job's own outcome."""
    from repcost.train.job import job_failed, run_hydra_jobs

    jobs: list[tuple[DictConfig, DictConfig]] = []  # (task config, Hydra config), collected on the way in
    outcomes: list = []
    inner: list[JobReturn] = []

    def task(k: int) -> TaskFunction:
        def job(cfg: DictConfig) -> Any:
            jobs.append((cfg, HydraConfig.instance().cfg))  # run_job made job k's config current
            if k + 1 < len(configs):
                inner.append(_run_job(configs[k + 1], hydra_context, task(k + 1)))
            else:
                _configure_group_log(configs)
                try:
                    outcomes.extend(run_hydra_jobs(jobs))
                except Exception as e:  # a bug: every job of the group records it
                    outcomes.extend([e] * len(configs))
            out = outcomes[k]
            return job_failed(out, *jobs[k]) if isinstance(out, Exception) else out
        return job

    first = _run_job(configs[0], hydra_context, task(0))
    return [first, *reversed(inner)]  # the innermost job's return came first


def _run_job(config: DictConfig, hydra_context: HydraContext, task_function: TaskFunction) -> JobReturn:
    return run_job(hydra_context=hydra_context, task_function=task_function, config=config,
                   job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")


def _configure_group_log(configs: list[DictConfig]) -> None:
    """The first job's job_logging, with each file handler repeated for every job's own file (each job
    directory keeps its log, e.g. train.log, holding the group's lines)."""
    base = OmegaConf.to_container(configs[0].hydra.job_logging, resolve=True)
    handlers = base.get("handlers") or {}
    files = [name for name, h in handlers.items() if isinstance(h, dict) and "filename" in h]
    root = base.setdefault("root", {})
    for k, config in enumerate(configs[1:], 1):
        other = (OmegaConf.to_container(config.hydra.job_logging, resolve=True).get("handlers") or {})
        for name in files:
            h = other.get(name)
            if isinstance(h, dict) and h.get("filename") != handlers[name]["filename"]:
                handlers[f"{name}_{k}"] = h
                root["handlers"] = [*root.get("handlers", []), f"{name}_{k}"]
    configure_log(OmegaConf.create(base), configs[0].hydra.verbose)


class _GroupTask:
    """One group as a submitit job; `checkpoint` is submitit's requeue protocol (the requeued group resumes
    each run from its own checkpoint)."""

    def __init__(self, hydra_context: HydraContext, task_function: TaskFunction, singleton_state: dict):
        self.hydra_context, self.task_function, self.singleton_state = hydra_context, task_function, singleton_state

    def __call__(self, configs: list[DictConfig]) -> list[JobReturn]:
        return run_group(configs, self.hydra_context, self.task_function, self.singleton_state)

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        import submitit

        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


def _run_submitit(launcher: Any, opts: dict, group_configs: list[list[DictConfig]]) -> list[list[JobReturn]]:
    try:
        import submitit
    except ImportError:
        raise RepcostError("hydra.launcher.submitit needs submitit: pip install 'repcost[cluster]'") from None
    cluster = opts["submitit"]
    executor = submitit.AutoExecutor(folder=opts["submitit_folder"], cluster=cluster,
                                     **{f"{cluster}_max_num_timeout": opts["max_num_timeout"]})
    params = {"name": str(launcher.config.hydra.job.name), **opts["submitit_params"]}
    try:
        executor.update_parameters(**params)
    except (ValueError, TypeError, AssertionError) as e:
        raise RepcostError(f"hydra.launcher.submitit_params: {' '.join(str(e).split())}") from None
    task = _GroupTask(launcher.hydra_context, launcher.task_function, Singleton.get_state())
    jobs = executor.map_array(task, group_configs)
    return [j.results()[0] for j in jobs]
