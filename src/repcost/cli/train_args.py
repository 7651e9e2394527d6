"""repcost-train's command line read before Hydra parses it: misuse becomes one line naming the fix, and --help
lists the config groups and top-level keys.

Hydra's argparse takes options before or after one run of overrides, but overrides on both sides of an
option end in "unrecognized arguments: <override>", and an unknown option or a missing value prints the
whole usage block. Hydra's options, declared here again, turn these cases into one line first.
Hydra's own help composes the config and lists every group through one repository copy per group (seconds on a
small machine); --help reads the YAML folders instead (and, for model/ and data/, the names the package's modules
register), with neither Hydra nor torch. Hydra's help stays available as --hydra-help.
"""

from __future__ import annotations

import argparse
import shlex
import textwrap
from pathlib import Path

from ..errors import RepcostError, did_you_mean
from ..paths import CONFIG_DIR
from ..registry import DATASETS, MODELS

GROUPS = ("model", "data", "train", "analysis", "experiment", "hydra/launcher")
REGISTRIES = {"model": MODELS, "data": DATASETS}  # their options are the registered names (no YAML)
USAGE = """repcost-train [--config-dir DIR] [-m] [KEY=VALUE | group=option ...]
       repcost-train --resume RUN_DIR [KEY=VALUE ...]"""
ABOUT = """\
Trains one model (with -m/--multirun: one job per combination of comma-separated values) and writes
its run directory (summary.json, metrics.jsonl, checkpoint.pt, .hydra/). Options come before the
overrides."""
HIDDEN = argparse.SUPPRESS  # Hydra's options that --help leaves to --hydra-help


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        unknown = message.partition("unrecognized arguments: ")[2].split()
        if unknown and unknown[0].startswith("-"):
            known = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
            message = f"unknown option {unknown[0]}" + (did_you_mean(unknown[0], known) or f"; see {self.prog} --help")
        raise RepcostError(message)


def _parser(prog: str) -> _Parser:
    """Hydra's options (`hydra.main`'s parser), with what --help says of the ones a repcost user needs."""
    p = _Parser(prog=prog, usage=USAGE, description=ABOUT, add_help=False, allow_abbrev=False,
                formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, max_help_position=30, width=110))
    p.add_argument("--config-dir", "-cd", metavar="DIR",
                   help="also search DIR for groups and presets (your own model/, data/, experiment/ ...)")
    p.add_argument("--resume", metavar="RUN_DIR", help="relaunch a run directory with its saved overrides (more may "
                                                       "follow)")
    for names in (("--config-path", "-cp"), ("--config-name", "-cn"), ("--package", "-p"), ("--experimental-rerun",)):
        p.add_argument(*names, help=HIDDEN)
    mode = p.add_mutually_exclusive_group()  # Hydra runs one of these
    mode.add_argument("--multirun", "-m", action="store_true",
                      help="run a sweep, e.g. model.width=10,20 seed=0,1 (hydra/launcher=parallel|stacked|slurm)")
    mode.add_argument("--cfg", "-c", choices=("job", "hydra", "all"), metavar="job",
                      help="print the composed config of the overrides (--cfg job) and exit")
    mode.add_argument("--run", "-r", action="store_true", help=HIDDEN)
    mode.add_argument("--shell-completion", "-sc", action="store_true", help=HIDDEN)
    mode.add_argument("--info", "-i", nargs="?", const="all", help=HIDDEN,
                      choices=("all", "config", "defaults", "defaults-tree", "plugins", "searchpath"))
    p.add_argument("--resolve", action="store_true", help=HIDDEN)
    p.add_argument("--hydra-help", action="store_true", help="Hydra's own options (--info, --shell-completion, ...)")
    p.add_argument("--version", action="store_true", help="repcost's version")
    p.add_argument("--help", "-h", action="store_true", help="this help")
    p.add_argument("overrides", nargs="*", help=HIDDEN)
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


def help_text(config_dir: str | None, prog: str = "repcost-train") -> str:
    """The whole --help text: options, the config groups (with those of the user's `--config-dir`, if one is given)
    and the top-level keys of config.yaml with their comments (between the defaults list and `hydra:`)."""
    dirs = [CONFIG_DIR, *([Path(config_dir).expanduser()] if config_dir else [])]
    lines = [_parser(prog).format_help(), "config groups (group=option):"]
    for group in GROUPS:
        names = {p.stem for d in dirs if (Path(d) / group).is_dir() for p in (Path(d) / group).glob("*.yaml")}
        names = sorted(names | set(REGISTRIES[group].declared() if group in REGISTRIES else []))
        if names:
            lines.append(textwrap.fill(f"{group}: {', '.join(names)}", width=110, initial_indent="  ",
                                       subsequent_indent="      ", break_on_hyphens=False))
    config = (Path(CONFIG_DIR) / "config.yaml").read_text().split("\nhydra:")[0].splitlines()
    first = next(i for i, line in enumerate(config) if line[:1].isalpha() and not line.startswith("defaults"))
    return "\n".join([*lines, "", "top-level keys (KEY=VALUE; sections: model.*, data.*, train.*, analysis.*):",
                      *("  " + line for line in config[first:] if line.strip()), ""])
