"""repcost-train's command line checked before Hydra parses it: misuse becomes one line naming the fix.

Hydra's argparse takes options before or after one run of overrides, but overrides on both sides of an
option end in "unrecognized arguments: <override>", an unknown option prints the whole usage block, and
a missing option value says little. These cases are caught here first.
"""

from __future__ import annotations

import difflib
import shlex

from ..errors import RepcostError

# Hydra's options: those that take a value, and flags
WITH_VALUE = {"--config-dir": "-cd", "--config-path": "-cp", "--config-name": "-cn", "--cfg": "-c",
              "--package": "-p", "--experimental-rerun": None}
FLAGS = {"--multirun": "-m", "--run": "-r", "--resolve": None, "--help": "-h", "--hydra-help": None,
         "--version": None, "--shell-completion": "-sc", "--info": "-i"}
OPTIONAL_VALUE = {"--info", "-i"}  # --info [what]
MODES = ("--run", "--multirun", "--cfg", "--info", "--shell-completion")  # Hydra takes one of these
SHORT = {short: long for long, short in {**WITH_VALUE, **FLAGS}.items() if short}


def _long(arg: str) -> str:
    return SHORT.get(arg, arg)


def check_argv(args: list[str], prog: str = "repcost-train") -> dict[str, str | None]:
    """The options in `args` (argv without prog) by long name, with their values (None for a flag; the last of
    a repeated option); RepcostError (one line) for options Hydra would reject or misread."""
    overrides_before: list[str] = []
    options: list[list[str]] = []
    overrides: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        name = _long(a.split("=", 1)[0]) if a.startswith("-") else None
        if name is None:  # an override
            overrides.append(a)
            i += 1
            continue
        if name not in WITH_VALUE and name not in FLAGS:
            near = difflib.get_close_matches(name, [*WITH_VALUE, *FLAGS], n=1, cutoff=0.75)
            hint = f"; did you mean {near[0]}?" if near else f"; see {prog} --help"
            raise RepcostError(f"unknown option {a}{hint}")
        opt = [a]
        if name in WITH_VALUE and "=" not in a:
            if i + 1 >= len(args) or args[i + 1].startswith("-"):
                raise RepcostError(f"{a} needs a value, e.g. {a} {'DIR' if 'dir' in name else 'VALUE'}")
            opt.append(args[i + 1])
            i += 1
        elif name in OPTIONAL_VALUE and i + 1 < len(args) and "=" not in args[i + 1] and not args[i + 1].startswith("-"):
            opt.append(args[i + 1])
            i += 1
        if overrides and not overrides_before:
            overrides_before = list(overrides)
        options.append(opt)
        i += 1
    modes = sorted({_long(o[0].split("=", 1)[0]) for o in options} & set(MODES))
    if len(modes) > 1:
        raise RepcostError(f"{' and '.join(modes)} cannot be combined: give one of {', '.join(MODES)}")
    if overrides_before and len(overrides) > len(overrides_before):  # overrides on both sides of an option
        fixed = " ".join(shlex.quote(x) for x in [prog, *(t for o in options for t in o), *overrides])
        raise RepcostError(f"options go before the overrides: {fixed}")
    given: dict[str, str | None] = {}
    for opt in options:  # [--name=value], [--name, value] or [--flag]
        name, _, inline = opt[0].partition("=")
        given[_long(name)] = inline or (opt[1] if len(opt) > 1 else None)
    return given
