"""Turns Hydra's and repcost's errors into one line and exit status 2."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

import yaml  # (Hydra's and OmegaConf's own dependency)

from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from ..config.messages import composition_error
from ..errors import FatalError, RepcostError, io_error


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
