"""Turns Hydra's and repcost's errors into one line and exit status 2."""

from __future__ import annotations

import difflib
import os
import re
import sys
from contextlib import contextmanager

from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf.errors import OmegaConfBaseException

from ..errors import FatalError, RepcostError, did_you_mean, io_error


def _near_key(key: str, cause: BaseException | None) -> str:
    """'; did you mean <key with the misspelt part mended>?' from the keys beside the misspelt one, else how to
    list the keys."""
    parent, bad = getattr(cause, "parent_node", None), str(getattr(cause, "key", "") or "")
    parts = key.lstrip("+~").split(".")
    try:
        names = [str(k) for k in parent.keys()] if parent is not None else []
    except Exception:  # not a mapping
        names = []
    if bad in parts and names:
        i = parts.index(bad)
        near = difflib.get_close_matches(bad, names, n=2, cutoff=0.6)
        if near:
            return "; did you mean " + " or ".join(".".join([*parts[:i], n, *parts[i + 1:]]) for n in near) + "?"
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


def one_line(exc: BaseException) -> str:
    """A one-line description of a config/composition error."""
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
    text = " ".join(str(exc).split())
    cause = exc.__cause__
    if cause is not None and str(cause).split():
        text += " (" + " ".join(str(cause).split("\n")[0].split()) + ")"
    return text


@contextmanager
def clean_exit(prog: str):
    """Run a Hydra app so that config/input errors print `prog: error: …` and exit 2."""
    os.environ.setdefault("HYDRA_FULL_ERROR", "1")  # let exceptions reach us instead of Hydra's printer
    try:
        yield
    except (RepcostError, FatalError) as e:  # FatalError: raised through Hydra's wrappers (a refused directory, …)
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(getattr(e, "code", 2))
    except (HydraException, OmegaConfBaseException) as e:
        print(f"{prog}: error: {one_line(e)}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:  # e.g. Hydra creating a run directory under a regular file
        where = e.filename or "an output path"
        print(f"{prog}: error: cannot create or write {where}: {e.strerror or e}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # an unwritable log file, invalid YAML in a config dir: one line; anything else is a bug
        line = environment_fault(e) if isinstance(e, ValueError) else yaml_fault(e)
        if line is None:
            raise
        print(f"{prog}: error: {line}", file=sys.stderr)
        sys.exit(2)


def environment_fault(exc: ValueError) -> str | None:
    """The one line for logging's "Unable to configure handler 'file'" (the run's log file cannot be opened:
    read-only file system, no permission, a directory in the way), or None for another ValueError."""
    cause = exc.__cause__
    if "Unable to configure handler" in str(exc) and isinstance(cause, OSError):
        path = cause.filename or "the run's log file"
        return f"{io_error(path, cause)}; the run directory must be writable (choose another hydra.run.dir)"
    return None


def yaml_fault(exc: BaseException) -> str | None:
    """One line for a YAML syntax error in a config file (e.g. a preset in --config-dir), or None."""
    import yaml  # (Hydra's own dependency)

    if not isinstance(exc, yaml.YAMLError):
        return None
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
    where = f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "a config file"
    return f"invalid YAML in {where}: {problem}; fix the file"
