"""Turns Hydra's and repcost's errors into one line and exit status 2."""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager

from hydra.errors import HydraException, MissingConfigException
from omegaconf.errors import OmegaConfBaseException

from ..errors import FatalError, OneLineParser, RepcostError  # noqa: F401 (OneLineParser: for the CLIs)
from ..runio import io_error


def one_line(exc: BaseException) -> str:
    """A one-line description of a config/composition error."""
    if isinstance(exc, MissingConfigException):
        m = re.search(r"Could not find '([^/']+)/([^']+)'", str(exc))
        opts = getattr(exc, "options", None) or []
        if m:
            return f"unknown {m.group(1)} '{m.group(2)}'; allowed: {', '.join(opts) or '(none)'}"
    m = re.search(r"Could not override '([^']+)'", str(exc))
    if m and "not in struct" in str(exc.__cause__ or ""):
        return (f"invalid config: {m.group(1)} is not a key of this config (`--cfg job` lists the keys; "
                f"a leading + appends a new key)")
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
    except RepcostError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except (HydraException, OmegaConfBaseException) as e:
        print(f"{prog}: error: {one_line(e)}", file=sys.stderr)
        sys.exit(2)
    except FatalError as e:  # raised through Hydra's wrappers (a refused directory, a start-up signal)
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(e.code)
    except OSError as e:  # e.g. Hydra creating a run directory under a regular file
        where = e.filename or "an output path"
        print(f"{prog}: error: cannot create or write {where}: {e.strerror or e}", file=sys.stderr)
        sys.exit(2)
    except ValueError as e:
        line = environment_fault(e)
        if line is None:
            raise
        print(f"{prog}: error: {line}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:
        line = yaml_fault(e)
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
    try:
        import yaml
    except ImportError:  # pragma: no cover - Hydra depends on PyYAML
        return None
    if not isinstance(exc, yaml.YAMLError):
        return None
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
    where = f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "a config file"
    return f"invalid YAML in {where}: {problem}; fix the file"
