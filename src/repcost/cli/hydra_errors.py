"""Turns Hydra's and repcost's errors into one line and exit status 2."""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager

from hydra.errors import HydraException, MissingConfigException
from omegaconf.errors import OmegaConfBaseException

from ..errors import OneLineParser, RepcostError  # noqa: F401 (OneLineParser: for the CLIs)


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
    except OSError as e:  # e.g. Hydra creating a run directory under a regular file
        where = e.filename or "an output path"
        print(f"{prog}: error: cannot create or write {where}: {e.strerror or e}", file=sys.stderr)
        sys.exit(2)
