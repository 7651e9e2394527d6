"""`repcost-train --help`: usage, the config groups and the top-level keys, read straight from the config files
(and, for model/ and data/, from the names the package's modules register).

Hydra's own help composes the config and lists every group through one repository copy per group
(seconds on a small machine); this reads the YAML folders instead, and needs neither Hydra nor torch.
Hydra's help stays available as `--hydra-help`; `--cfg job [overrides]` prints a composed config.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from ..paths import CONFIG_DIR
from ..registry import DATASETS, MODELS

GROUPS = ("model", "data", "train", "analysis", "experiment", "hydra/launcher")
REGISTRIES = {"model": MODELS, "data": DATASETS}  # their options are the registered names (no YAML)
USAGE = """\
usage: repcost-train [--config-dir DIR] [-m] [KEY=VALUE | group=option ...]
       repcost-train --resume RUN_DIR [KEY=VALUE ...]

Trains one model (with -m/--multirun: one job per combination of comma-separated values) and writes
its run directory (summary.json, metrics.jsonl, checkpoint.pt, .hydra/). Options come before the
overrides.

options:
  --config-dir DIR     also search DIR for groups and presets (your own model/, data/, experiment/ ...)
  -m, --multirun       run a sweep, e.g. model.width=10,20 seed=0,1 (hydra/launcher=parallel|stacked|slurm)
  --resume RUN_DIR     relaunch a run directory with its saved overrides (more may follow)
  --cfg job            print the composed config of the overrides and exit
  --hydra-help         Hydra's own options (--info, --shell-completion, ...)
  --version            repcost's version
  -h, --help           this help
"""


def group_lines(dirs: list[Path]) -> list[str]:
    """`group: option, option, ...` for each config group found in `dirs`."""
    lines = []
    for group in GROUPS:
        names = {p.stem for d in dirs if (Path(d) / group).is_dir() for p in (Path(d) / group).glob("*.yaml")}
        names = sorted(names | set(REGISTRIES[group].declared() if group in REGISTRIES else []))
        if names:
            lines.append(textwrap.fill(f"{group}: {', '.join(names)}", width=110, initial_indent="  ",
                                       subsequent_indent="      ", break_on_hyphens=False))
    return lines


def top_level_lines() -> list[str]:
    """The top-level keys of config.yaml with their comments (between the defaults list and `hydra:`)."""
    lines = (Path(CONFIG_DIR) / "config.yaml").read_text().split("\nhydra:")[0].splitlines()
    first = next(i for i, line in enumerate(lines) if line[:1].isalpha() and not line.startswith("defaults"))
    return ["  " + line for line in lines[first:] if line.strip()]


def help_text(config_dir: str | None) -> str:
    """The whole --help text (with the groups of the user's `--config-dir`, if one is given)."""
    dirs = [CONFIG_DIR, *([Path(config_dir).expanduser()] if config_dir else [])]
    return "\n".join([USAGE, "config groups (group=option):", *group_lines(dirs), "",
                      "top-level keys (KEY=VALUE; sections: model.*, data.*, train.*, analysis.*):",
                      *top_level_lines(), ""])
