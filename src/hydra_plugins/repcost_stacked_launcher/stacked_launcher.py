"""`hydra/launcher=stacked`: a multirun's jobs that differ only in stackable keys run as one stacked process.

The launcher composes every job of the multirun, groups the jobs whose configs differ only in seed,
train.lam, train.phases.N.lr and model.init_scale (`repcost.identity.stack_key`), and runs each group as
one process that trains its runs stacked and writes each run's job directory exactly as the job
alone would. Groups run here one after another, in `n_jobs` processes, or as submitit jobs (local or SLURM).

Every job goes through Hydra's own `run_job` (output dir, HydraConfig, logging, callbacks, JobReturn). A group's
jobs are nested: job k's task function starts job k+1's `run_job`, and the innermost trains the whole group as one
process (`repcost.train.job.run_hydra_jobs`, as `repcost-train`'s task function does); each job then returns its
own outcome.
"""

import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

from repcost.errors import RepcostError

log = logging.getLogger(__name__)
SUBMITIT_CLUSTERS = ("local", "slurm")


@dataclass
class StackedLauncherConf:
    """The launcher's structured config, registered as `hydra/launcher=repcost_stacked`
    (configs/hydra/launcher/stacked.yaml is repcost's preset on top of it). No `from __future__ import
    annotations` in this module: Hydra's plugin scan runs it outside sys.modules, where a dataclass cannot
    resolve string annotations."""

    _target_: str = "hydra_plugins.repcost_stacked_launcher.stacked_launcher.StackedLauncher"
    # most runs in one stacked process (a group above it is split into near-equal groups)
    max_members: int = 64
    # groups run at once on this machine, each in its own process (1: one after another in this process;
    # -1: one per CPU core). Ignored with submitit.
    n_jobs: int = 1
    # null: run the groups here; local or slurm: each group one submitit job (needs repcost[cluster])
    submitit: Optional[str] = None
    submitit_folder: str = "${hydra.sweep.dir}/.submitit/%j"
    # submitit.AutoExecutor parameters, e.g. {timeout_min: 600, slurm_partition: gpu, gpus_per_node: 1}
    submitit_params: Dict[str, Any] = field(default_factory=dict)
    # requeues after a time limit before a group fails (submitit's max_num_timeout)
    max_num_timeout: int = 3

    def __post_init__(self) -> None:
        """The values' checks (Hydra checks the keys and types): a bad one is a RepcostError (one line, exit 2)."""
        if self.max_members < 1:
            raise RepcostError(f"hydra.launcher.max_members={self.max_members}: must be a positive integer "
                               "(the most runs in one stacked process)")
        if self.n_jobs == 0 or self.n_jobs < -1:
            raise RepcostError(f"hydra.launcher.n_jobs={self.n_jobs}: must be a positive integer or -1 (one per core)")
        if self.submitit not in (None, *SUBMITIT_CLUSTERS):
            raise RepcostError(f"hydra.launcher.submitit={self.submitit}: allowed: null (run here), "
                               f"{', '.join(SUBMITIT_CLUSTERS)}")


ConfigStore.instance().store(group="hydra/launcher", name="repcost_stacked", node=StackedLauncherConf,
                             provider="repcost")


def stack_key_of_job(config: DictConfig) -> str | None:
    """The grouping key of a composed sweep job (hydra node included, its HydraConfig current): jobs with equal
    keys train as one stacked process (where a job whose config does not validate fails alone, as unstacked).
    None: the job runs alone (e.g. its config cannot be resolved, so it fails exactly as an unstacked job does)."""
    from repcost.identity import stack_key

    if config.hydra.job.chdir:  # jobs that change into their own directory cannot share a process
        return None
    try:
        cfg = OmegaConf.masked_copy(config, [k for k in config if k != "hydra"])
        return stack_key(OmegaConf.to_container(cfg, resolve=True))
    except Exception:  # any problem shows when the job runs alone
        return None


def plan_groups(keys: Sequence[str | None], max_members: int = 64,
                dirs: Sequence[str] | None = None) -> list[list[int]]:
    """Indices of the jobs to run together: equal keys share a group (None: a job of its own).

    A key's jobs are split into ceil(n / max_members) groups of near-equal size; a second job in a directory
    of the same key runs alone (in one group they would lock each other out). Groups are ordered by their first
    job and keep the jobs' order.
    """
    import numpy as np  # here: every Hydra start imports this module

    groups: list[list[int]] = []
    by_key: dict[str, list[int]] = {}
    seen = set()
    for i, k in enumerate(keys):
        where = (k, dirs[i] if dirs is not None else i)
        if k is None or where in seen:
            groups.append([i])
        else:
            by_key.setdefault(k, []).append(i)
        seen.add(where)
    for idx in by_key.values():
        groups += [[int(i) for i in part] for part in np.array_split(idx, math.ceil(len(idx) / max_members))]
    return sorted(groups, key=lambda g: g[0])


class StackedLauncher(Launcher):
    def __init__(self, **params: Any) -> None:
        self.params = params

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        """Hydra calls it before `launch` (the task function is repcost-train's, which `run_group` does not need)."""
        self.config, self.hydra_context = config, hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
        setup_globals()
        opts = StackedLauncherConf(**{k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
                                      for k, v in self.params.items()})
        config = self.config
        configure_log(config.hydra.hydra_logging, config.hydra.verbose)

        configs, keys, dirs = [], [], []
        for num, overrides in enumerate(job_overrides, initial_job_idx):  # as Hydra's basic launcher composes them
            c = self.hydra_context.config_loader.load_sweep_config(config, list(overrides))
            with open_dict(c):
                c.hydra.job.id = c.hydra.job.num = num
            HydraConfig.instance().set_config(c)
            configs.append(c)  # its output dir (hydra.sweep.dir/subdir) as `run_job` resolves it:
            dirs.append(os.path.abspath(os.path.join(str(c.hydra.sweep.dir), str(c.hydra.sweep.subdir))))
            keys.append(stack_key_of_job(c))
        groups = plan_groups(keys, opts.max_members, dirs)
        log.info(f"Launching {len(configs)} jobs as {len(groups)} stacked group(s), sweep output dir: "
                 f"{config.hydra.sweep.dir}")
        for g in groups:
            log.info("\t" + " | ".join(f"#{initial_job_idx + i} : {' '.join(filter_overrides(job_overrides[i]))}"
                                       for i in g))
        group_configs = [[configs[i] for i in g] for g in groups]
        if opts.submitit is not None:
            try:
                import submitit
            except ImportError:
                raise RepcostError("hydra.launcher.submitit needs submitit: pip install 'repcost[cluster]'") from None
            executor = submitit.AutoExecutor(folder=opts.submitit_folder, cluster=opts.submitit,
                                             **{f"{opts.submitit}_max_num_timeout": opts.max_num_timeout})
            try:
                executor.update_parameters(**{"name": str(config.hydra.job.name), **opts.submitit_params})
            except (ValueError, TypeError, AssertionError) as e:
                raise RepcostError(f"hydra.launcher.submitit_params: {' '.join(str(e).split())}") from None
            hydra_context, state = self.hydra_context, Singleton.get_state()

            # requeued after a time limit: each run resumes from its checkpoint
            class GroupTask(submitit.helpers.Checkpointable):
                def __call__(self, configs: list[DictConfig]) -> list[JobReturn]:
                    return run_group(configs, hydra_context, state)

            results = [j.results()[0] for j in executor.map_array(GroupTask(), group_configs)]
        else:  # joblib; n_jobs=1 (or one group) runs them one after another in this process, where signals reach the
            from joblib import Parallel, delayed  # training directly (joblib: hydra-joblib-launcher's dependency)

            n_jobs = opts.n_jobs if len(groups) > 1 else 1
            state = Singleton.get_state() if n_jobs != 1 else None  # (this process has Hydra's globals)
            results = Parallel(n_jobs=n_jobs, backend="loky")(
                delayed(run_group)(gc, self.hydra_context, state) for gc in group_configs)
            configure_log(config.hydra.hydra_logging, config.hydra.verbose)  # (each job configured its own)
        by_job = dict(zip([i for g in groups for i in g], [r for rets in results for r in rets]))
        return [by_job[i] for i in range(len(configs))]


def run_group(configs: list[DictConfig], hydra_context: HydraContext,
              singleton_state: dict | None = None) -> list[JobReturn]:
    """Hydra's `run_job` for every job of the group, nested: job k's task function runs job k+1, and the innermost
    trains all of them at once (stacked when several); each job's task function then returns that job's own
    outcome."""
    from repcost.train.job import job_failed, run_hydra_jobs

    if singleton_state is not None:  # in another process (joblib, submitit): Hydra's globals first
        setup_globals()
        Singleton.set_state(singleton_state)
    jobs: list[tuple[DictConfig, DictConfig]] = []  # (task config, Hydra config), collected on the way in
    outcomes: list = []
    returns: dict[int, JobReturn] = {}

    def job(cfg: DictConfig) -> Any:  # job k's task function, k = the jobs entered before it
        k = len(jobs)
        jobs.append((cfg, HydraConfig.instance().cfg))  # run_job made job k's config current
        if k + 1 < len(configs):
            returns[k + 1] = start(k + 1)
        else:
            _configure_group_log(configs)
            try:
                outcomes.extend(run_hydra_jobs(jobs))
            except Exception as e:  # a bug: every job of the group records it
                outcomes.extend([e] * len(configs))
        out = outcomes[k]
        return job_failed(out, *jobs[k]) if isinstance(out, Exception) else out

    def start(k: int) -> JobReturn:
        return run_job(hydra_context=hydra_context, task_function=job, config=configs[k],
                       job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")

    returns[0] = start(0)
    return [returns[k] for k in range(len(configs))]


def _configure_group_log(configs: list[DictConfig]) -> None:
    """The first job's job_logging, with each file handler repeated for every job's own file (each job
    directory keeps its log, e.g. train.log, holding the group's lines)."""
    base = OmegaConf.to_container(configs[0].hydra.job_logging, resolve=True)
    handlers = base.get("handlers") or {}
    files = [name for name, h in handlers.items() if isinstance(h, dict) and "filename" in h]
    loggers = [base.setdefault("root", {}), *(base.get("loggers") or {}).values()]
    for k, config in enumerate(configs[1:], 1):
        other = (OmegaConf.to_container(config.hydra.job_logging, resolve=True).get("handlers") or {})
        for name in files:
            h = other.get(name)
            if isinstance(h, dict) and h.get("filename") != handlers[name]["filename"]:
                handlers[f"{name}_{k}"] = h
                for lg in loggers:  # every logger writing to the first job's file writes to each job's
                    if name in lg.get("handlers", []):
                        lg["handlers"] = [*lg["handlers"], f"{name}_{k}"]
    configure_log(OmegaConf.create(base), configs[0].hydra.verbose)
