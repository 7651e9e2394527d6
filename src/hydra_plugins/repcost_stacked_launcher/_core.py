"""The stacked launcher's work: compose every job, group them, run each group (here, in processes, or submitit).

A group of several jobs goes through what Hydra's `run_job` does for one job — output dir, HydraConfig,
logging, callbacks (`on_job_start`/`on_job_end`, so repcost's CollectCallback sees every job), JobReturn —
with the task function replaced by `repcost.train.stacked.run_stacked_jobs`, which trains the group as one
process and gives each job the return value the task function would have given it.
"""

from __future__ import annotations

import copy
import logging
import os
from pathlib import Path
from typing import Any, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import (
    JobReturn,
    JobRuntime,
    JobStatus,
    _flush_loggers,
    _save_config,
    configure_log,
    env_override,
    filter_overrides,
    run_job,
    setup_globals,
)
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from repcost.errors import RepcostError

log = logging.getLogger(__name__)
SUBMITIT_CLUSTERS = ("local", "slurm")


def _options(params: dict) -> dict:
    """The launcher's options, checked: a bad one is a RepcostError (one line, exit 2)."""
    opts = {"max_members": 64, "n_jobs": 1, "submitit": None, "submitit_folder": ".submitit/%j",
            "submitit_params": {}, "max_num_timeout": 3, **params}
    for k, v in opts.items():
        if OmegaConf.is_config(v):
            opts[k] = OmegaConf.to_container(v, resolve=True)
    unknown = sorted(set(opts) - {"max_members", "n_jobs", "submitit", "submitit_folder", "submitit_params",
                                  "max_num_timeout", "_target_"})
    if unknown:
        raise RepcostError(f"hydra.launcher: unknown option(s) {', '.join(unknown)} of the stacked launcher")
    if not isinstance(opts["max_members"], int) or opts["max_members"] < 1:
        raise RepcostError(f"hydra.launcher.max_members={opts['max_members']}: must be a positive integer "
                           "(the most runs in one stacked process)")
    if not isinstance(opts["n_jobs"], int) or opts["n_jobs"] == 0 or opts["n_jobs"] < -1:
        raise RepcostError(f"hydra.launcher.n_jobs={opts['n_jobs']}: must be a positive integer or -1 (one per core)")
    if opts["submitit"] not in (None, *SUBMITIT_CLUSTERS):
        raise RepcostError(f"hydra.launcher.submitit={opts['submitit']}: allowed: null (run here), "
                           f"{', '.join(SUBMITIT_CLUSTERS)}")
    if not isinstance(opts["submitit_params"], dict):
        raise RepcostError(f"hydra.launcher.submitit_params={opts['submitit_params']}: must be a mapping, "
                           "e.g. {timeout_min: 600, slurm_partition: gpu}")
    return opts


def _job_dir(config: DictConfig) -> str:
    """A composed job's output directory (hydra.sweep.dir/hydra.sweep.subdir, as `run_job` resolves it)."""
    HydraConfig.instance().set_config(config)
    return os.path.abspath(os.path.join(str(config.hydra.sweep.dir), str(config.hydra.sweep.subdir)))


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
    from repcost.train.stacked import plan_groups, stack_key_of_job

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
    orig = HydraConfig.instance().cfg
    try:
        keys = [stack_key_of_job(c) for c in configs]
        dirs = [_job_dir(c) for c in configs]
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
    """Run one group: a single job as Hydra runs it, several as one stacked process."""
    if singleton_state is not None:  # in another process (joblib, submitit): Hydra's globals first
        setup_globals()
        Singleton.set_state(singleton_state)
    if len(configs) == 1:
        return [run_job(hydra_context=hydra_context, task_function=task_function, config=configs[0],
                        job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")]
    return _run_stacked(configs, hydra_context, task_function)


def _run_stacked(configs: list[DictConfig], hydra_context: HydraContext, task_function: TaskFunction
                 ) -> list[JobReturn]:
    """Hydra's `run_job` for each job of the group around one call that trains them all."""
    from repcost.train.stacked import run_stacked_jobs

    callbacks = hydra_context.callbacks
    orig = HydraConfig.instance().cfg
    rets = []
    try:
        for config in configs:
            out = _job_dir(config)
            with read_write(config.hydra.runtime), open_dict(config.hydra.runtime):
                config.hydra.runtime.output_dir = out
            HydraConfig.instance().set_config(config)
            ret = JobReturn()
            ret.cfg = copy.deepcopy(config)
            with read_write(ret.cfg), open_dict(ret.cfg):
                del ret.cfg["hydra"]
            ret.hydra_cfg = copy.deepcopy(HydraConfig.instance().cfg)
            ret.overrides = OmegaConf.to_container(config.hydra.overrides.task)
            ret.working_dir = os.getcwd()  # chdir jobs never share a group (stack_key_of_job)
            Path(out).mkdir(parents=True, exist_ok=True)
            if config.hydra.output_subdir is not None:
                sub = Path(out) / str(config.hydra.output_subdir)
                _save_config(ret.cfg, "config.yaml", sub)
                _save_config(ret.hydra_cfg, "hydra.yaml", sub)
                _save_config(config.hydra.overrides.task, "overrides.yaml", sub)
            rets.append(ret)
        _configure_group_log(configs)
        with env_override(rets[0].hydra_cfg.hydra.job.env_set):
            for config in configs:
                HydraConfig.instance().set_config(config)
                callbacks.on_job_start(config=config, task_function=task_function)
            try:
                values: list[Any] = run_stacked_jobs(configs)
                status = JobStatus.COMPLETED
            except Exception as e:  # what run_job records for a task function that raised
                values, status = [e] * len(configs), JobStatus.FAILED
        for config, ret, value in zip(configs, rets, values):
            ret.return_value, ret.status = value, status
            ret.task_name = JobRuntime.instance().get("name")
            HydraConfig.instance().set_config(config)
            _flush_loggers()
            callbacks.on_job_end(config=config, job_return=ret)
        return rets
    finally:
        HydraConfig.instance().cfg = orig


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
