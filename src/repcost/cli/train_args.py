"""repcost-train's command line checked before Hydra parses it: misuse becomes one line naming the fix.

Hydra's argparse takes options before or after one run of overrides, but overrides on both sides of an
option end in "unrecognized arguments: <override>", and an unknown option or a missing value prints the
whole usage block. Hydra's options, declared here again, turn these cases into one line first.
"""

from __future__ import annotations

import argparse
import re
import shlex

from ..errors import RepcostError, did_you_mean


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        unknown = message.partition("unrecognized arguments: ")[2].split()
        if unknown and unknown[0].startswith("-"):
            known = re.findall(r"--[\w-]+", self.format_usage())  # every option's long name
            message = f"unknown option {unknown[0]}" + (did_you_mean(unknown[0], known) or f"; see {self.prog} --help")
        raise RepcostError(message)


def check_argv(args: list[str], prog: str = "repcost-train") -> argparse.Namespace:
    """The options in `args` (argv without prog) as Hydra's parser (`hydra.main`'s) reads them, with the overrides;
    RepcostError (one line) for options Hydra would reject or misread."""
    p = _Parser(prog=prog, add_help=False, allow_abbrev=False)
    for names in (("--config-dir", "-cd"), ("--config-path", "-cp"), ("--config-name", "-cn"), ("--package", "-p"),
                  ("--experimental-rerun",)):
        p.add_argument(*names)
    for names in (("--resolve",), ("--help", "-h"), ("--hydra-help",), ("--version",)):
        p.add_argument(*names, action="store_true")
    mode = p.add_mutually_exclusive_group()  # Hydra runs one of these
    for names in (("--run", "-r"), ("--multirun", "-m"), ("--shell-completion", "-sc")):
        mode.add_argument(*names, action="store_true")
    mode.add_argument("--cfg", "-c", choices=("job", "hydra", "all"))
    mode.add_argument("--info", "-i", nargs="?", const="all",
                      choices=("all", "config", "defaults", "defaults-tree", "plugins", "searchpath"))
    p.add_argument("overrides", nargs="*")
    try:
        return p.parse_args(args)
    except RepcostError as e:
        if not str(e).startswith("unrecognized arguments: "):
            raise
    overrides = p.parse_intermixed_args(args).overrides  # overrides on both sides of an option
    rest = list(args)
    for o in overrides:
        rest.remove(o)
    raise RepcostError("options go before the overrides: " + shlex.join([prog, *rest, *overrides]))
