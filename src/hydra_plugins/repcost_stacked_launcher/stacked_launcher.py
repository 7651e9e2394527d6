"""`hydra/launcher=stacked`: a multirun's jobs that differ only in stackable keys run as one stacked process.

The launcher composes every job of the multirun, groups the jobs whose configs differ only in seed,
train.lam, train.phases.N.lr and model.init_scale (`repcost.identity.stack_key`), and runs each group as
one process that trains its runs stacked and writes each run's job directory exactly as the job
alone would. Every job goes through Hydra's own `run_job` (`_core`). Groups run here one after another,
in `n_jobs` processes, or as submitit jobs (local or SLURM).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class StackedLauncher(Launcher):
    def __init__(self, **params: Any) -> None:
        self.params = params
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.task_function, self.hydra_context = config, task_function, hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from . import _core  # lazy: plugin discovery imports this module on every Hydra start

        return _core.launch(self, job_overrides, initial_job_idx)
