"""Config error wording: what a key allows, in the schema's own words; Hydra's composition errors in one line; and
`clean_exit`, which ends a command on such an error (or repcost's own) with one line and exit status 2."""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
import types
import typing
from contextlib import contextmanager
from typing import Any

import yaml  # (Hydra's and OmegaConf's own dependency)
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from ..errors import ConfigError, FatalError, RepcostError, did_you_mean, io_error


def _describe(tp: Any) -> str:
    """A type annotation in words: int -> 'an integer', Optional[float] -> 'a number or null', ..."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        text = " or ".join(_describe(a) for a in inner)
        return text + " or null" if len(inner) < len(args) else text
    if origin in (list, tuple, typing.List, typing.Tuple):
        nouns = {int: "integers", float: "numbers", bool: "booleans", str: "strings"}
        noun = None if not args else ("sections (each a mapping of its keys)" if dataclasses.is_dataclass(args[0])
                                      else nouns.get(args[0]))
        return f"a list of {noun}" if noun else "a list"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(tp, "a value of its type")


# values that a schema's range checks usually refuse (lists first: a list check often refuses a number in other
# words): probing with them finds the check's words
PROBES = ([-(10**9)], ["\x00not-an-option"], -(10**9), 0, -1e300, math.nan, 0.0, "\x00not-an-option")


def type_allowed(schema: type, key: str) -> str:
    """What `key` of dataclass `schema` allows, in the schema's own words where its checks say them.

    A value of the wrong type never reaches the schema's `__post_init__` checks, so they are probed with
    values that such checks refuse (e.g. depth = 0 -> "an integer >= 2"); without a check for the key, the
    type itself in words ("an integer", "a number or null")."""
    for probe in PROBES:
        try:
            schema(**{key: probe})
        except ConfigError as e:
            if e.key == key:
                return e.allowed
        except Exception:  # a probe of another type than the check expects
            pass
    return _describe(typing.get_type_hints(schema)[key])  # (resolvable: OmegaConf built the schema with them)


def _near_key(key: str, cause: BaseException | None) -> str:
    """'; did you mean <key with the misspelt part mended>?' from the keys beside the misspelt one, else how to
    list the keys."""
    parent, bad = getattr(cause, "parent_node", None), str(getattr(cause, "key", "") or "")
    parts = key.lstrip("+~").split(".")
    if bad in parts and isinstance(parent, DictConfig):  # (a list's index has no near names)
        i = parts.index(bad)  # the misspelt part, mended between the parts around it
        if near := did_you_mean(bad, parent.keys(), ".".join([*parts[:i], ""]), ".".join(["", *parts[i + 1:]])):
            return near
    return " (`--cfg job` lists the keys; a leading + appends a new key)"


def parse_error(exc: OverrideParseException, argv: list[str]) -> str:
    """One line for an override Hydra's grammar cannot read: which one, and what to write instead (`argv`: the
    command's arguments, where the shell may have split one override in two at a space)."""
    o = exc.override
    i = argv.index(o) if o in argv else -1
    prev, nxt = (argv[i - 1] if i > 0 else ""), (argv[i + 1] if 0 <= i < len(argv) - 1 else "")
    if o.endswith(",") and nxt and "=" not in nxt:
        fix = f"write {o}{nxt} (a list of values is one word: no space after a comma)"
    elif "=" not in o and prev.endswith(("=", ",")):
        fix = f"write {prev}{o} (no space around = or after a comma)"
    elif "=" not in o:
        fix = "every override is KEY=VALUE (a value with spaces goes in quotes: 'key=a b')"
    elif any(o.count(a) != o.count(b) for a, b in ("[]", "()", "{}")):
        fix = "its brackets do not pair up (a list is key=[1,2])"
    else:
        fix = "quote a value with special characters (key='value')"
    return f"cannot read the override '{o}': {fix}; see https://hydra.cc/docs/advanced/override_grammar/basic"


def composition_error(exc: BaseException) -> str:
    """One line for an error of Hydra's composition (an override, a group option, a key) or of OmegaConf."""
    if isinstance(exc, OverrideParseException):
        return parse_error(exc, sys.argv[1:])
    if isinstance(exc, MissingConfigException) and exc.options is not None:  # a group's option (maybe nested)
        group, _, name = str(exc.missing_cfg_file).rpartition("/")
        near, allowed = did_you_mean(name, exc.options), ", ".join(exc.options) or "(none)"
        hint = (f"; a plugin's? its {group}/{name}.yaml goes in a --config-dir and its module in "
                "plugins=[mypkg.module]") if group in ("model", "data") and not near else ""
        return f"unknown {group} '{name}'" + (f"{near} (allowed: {allowed})" if near else f"; allowed: {allowed}") + hint
    m = re.search(r"Could not override '([^']+)'", str(exc))
    if m and "not in struct" in str(exc.__cause__ or ""):
        return f"invalid config: {m.group(1)} is not a key of this config{_near_key(m.group(1), exc.__cause__)}"
    cause = " ".join(str(exc.__cause__ or "").split("\n")[0].split())
    return " ".join(str(exc).split()) + (f" ({cause})" if cause else "")


@contextmanager
def clean_exit(prog: str):
    """Run a Hydra app so that config/input errors print `prog: error: …` and exit 2."""
    os.environ.setdefault("HYDRA_FULL_ERROR", "1")  # let exceptions reach us instead of Hydra's printer
    try:
        yield
        return
    except (RepcostError, FatalError) as e:  # FatalError: raised through Hydra's wrappers (a refused directory, …)
        line, code = str(e), getattr(e, "code", 2)
    except (HydraException, OmegaConfBaseException) as e:
        line, code = composition_error(e), 2
    except BrokenPipeError:  # the reader has gone (`repcost-train --help | head`): nothing to tell anyone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the interpreter's last flush is quiet
        sys.exit(141)  # as a shell tool killed by SIGPIPE
    except Exception as e:  # a directory or log file that cannot be written, invalid YAML: one line; else a bug
        # (logging's "Unable to configure handler 'file'" is a ValueError whose cause is the log file's OSError)
        fault, code = (e.__cause__ if "Unable to configure handler" in str(e) else e), 2
        if isinstance(fault, OSError):
            hint = "; the run directory must be writable (choose another hydra.run.dir)" if fault is not e else ""
            line = f"{io_error(fault.filename or 'an output path', fault)}{hint}"
        elif isinstance(e, yaml.YAMLError):  # a config file's syntax (e.g. a preset in --config-dir)
            mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
            where = f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "a config file"
            line = f"invalid YAML in {where}: {' '.join(str(getattr(e, 'problem', None) or e).split())}; fix the file"
        else:
            raise
    print(f"{prog}: error: {line}", file=sys.stderr)
    sys.exit(code)
