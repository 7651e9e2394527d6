"""repcost-train's command line read before Hydra parses it: misuse becomes one line naming the fix, and --help
lists the config groups and top-level keys.

Hydra's argparse takes options before or after one run of overrides, but overrides on both sides of an
option end in "unrecognized arguments: <override>", and an unknown option or a missing value prints the
whole usage block. Hydra's options, declared here again, turn these cases into one line first.
Hydra's own help composes the config, whose model and data options load torch (seconds on a small machine); --help
fills Hydra's help template of the app from the YAML folders instead (and, for model/ and data/, the names the
package's modules register), with neither Hydra's composition nor torch. Hydra's help stays available as --hydra-help.
"""

from __future__ import annotations

import argparse
import shlex
import textwrap
from pathlib import Path

from omegaconf import OmegaConf

from ..errors import RepcostError, did_you_mean
from ..paths import CONFIG_DIR
from ..registry import DATASETS, MODELS

GROUPS = ("model", "data", "train", "analysis", "experiment", "hydra/launcher")
REGISTRIES = {"model": MODELS, "data": DATASETS}  # their options are the registered names (no YAML)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        unknown = message.partition("unrecognized arguments: ")[2].split()
        if unknown and unknown[0].startswith("-"):
            known = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
            message = f"unknown option {unknown[0]}" + (did_you_mean(unknown[0], known) or f"; see {self.prog} --help")
        raise RepcostError(message)


def _parser(prog: str) -> _Parser:
    """Hydra's options (`hydra.main`'s parser), repcost-train's --resume and --version; --help says what they do
    (configs/hydra/help/repcost.yaml)."""
    p = _Parser(prog=prog, add_help=False, allow_abbrev=False)
    for names in (("--config-dir", "-cd"), ("--config-path", "-cp"), ("--config-name", "-cn"), ("--package", "-p"),
                  ("--experimental-rerun",), ("--resume",)):
        p.add_argument(*names)
    mode = p.add_mutually_exclusive_group()  # Hydra runs one of these
    for names in (("--multirun", "-m"), ("--run", "-r"), ("--shell-completion", "-sc")):
        mode.add_argument(*names, action="store_true")
    mode.add_argument("--cfg", "-c", choices=("job", "hydra", "all"))
    mode.add_argument("--info", "-i", nargs="?", const="all",
                      choices=("all", "config", "defaults", "defaults-tree", "plugins", "searchpath"))
    for names in (("--resolve",), ("--hydra-help",), ("--version",), ("--help", "-h")):
        p.add_argument(*names, action="store_true")
    p.add_argument("overrides", nargs="*")
    return p


def check_argv(args: list[str], prog: str = "repcost-train") -> argparse.Namespace:
    """The options in `args` (argv without prog, --resume RUN_DIR read before) as Hydra's parser reads them, with the
    overrides; RepcostError (one line) for options Hydra would reject or misread."""
    p = _parser(prog)
    try:
        options = p.parse_args(args)
    except RepcostError as e:
        if not str(e).startswith("unrecognized arguments: "):
            raise
        overrides = p.parse_intermixed_args(args).overrides  # overrides on both sides of an option
        rest = list(args)
        for o in overrides:
            rest.remove(o)
        raise RepcostError("options go before the overrides: " + shlex.join([prog, *rest, *overrides])) from None
    if options.resume is not None:
        raise RepcostError(f"--resume comes first: {prog} --resume RUN_DIR [KEY=VALUE ...]")
    return options


def help_text(config_dir: str | None) -> str:
    """Hydra's help template of repcost-train (configs/hydra/help/repcost.yaml) filled as Hydra fills it: the
    options of each group (with those of the user's `--config-dir`, if one is given) and the top-level keys of
    config.yaml with their comments (between the defaults list and `hydra:`)."""
    dirs = [Path(CONFIG_DIR), *([Path(config_dir).expanduser()] if config_dir else [])]
    groups = []
    for group in GROUPS:
        names = {p.stem for d in dirs for p in (d / group).glob("*.yaml")}
        names = sorted(names | set(REGISTRIES[group].declared() if group in REGISTRIES else []))
        if names:
            groups.append(textwrap.fill(f"{group}: {', '.join(names)}", width=110, initial_indent="  ",
                                        subsequent_indent="      ", break_on_hyphens=False))
    config = (dirs[0] / "config.yaml").read_text().split("\nhydra:")[0].splitlines()
    first = next(i for i, line in enumerate(config) if line[:1].isalpha() and not line.startswith("defaults"))
    template = OmegaConf.load(dirs[0] / "hydra" / "help" / "repcost.yaml").template
    keys = ["  " + line for line in config[first:] if line.strip()]
    return template.replace("$APP_CONFIG_GROUPS", "\n".join(groups)).replace("$CONFIG", "\n".join(keys)) + "\n"
