"""The stacked launcher's structured config, registered as `hydra/launcher=repcost_stacked`
(configs/hydra/launcher/stacked.yaml is repcost's preset on top of it)."""

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from hydra.core.config_store import ConfigStore


@dataclass
class StackedLauncherConf:
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


ConfigStore.instance().store(group="hydra/launcher", name="repcost_stacked", node=StackedLauncherConf,
                             provider="repcost")
