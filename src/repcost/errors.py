"""Errors that end a command with one line and exit status 2 (never a traceback)."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable
from pathlib import Path


def did_you_mean(word: str, options: Iterable[str], prefix: str = "", suffix: str = "") -> str:
    """'; did you mean <prefix><closest><suffix>?' for a near miss among `options`, else ''."""
    near = difflib.get_close_matches(str(word), [str(o) for o in options], n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(prefix + n + suffix for n in near)}?" if near else ""


class RepcostError(Exception):
    """A user-facing error: bad config, bad input, a run that cannot go on."""


class ConfigError(RepcostError):
    """An invalid config value: names the key, the value and what is allowed."""

    def __init__(self, key: str, value, allowed: str):
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"invalid config: {key}={value!r}; allowed: {allowed}")


def check(ok: bool, key: str, value, allowed: str) -> None:
    """Raise ConfigError(key, value, allowed) unless `ok`."""
    if not ok:
        raise ConfigError(key, value, allowed)


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and exit 2, as every repcost error."""

    def error(self, message: str):
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


class FatalError(BaseException):
    """A user-facing error raised where Hydra would swallow an Exception (a callback's becomes a warning, a task
    function's a failed job): it passes through to the CLI, which prints it in one line and exits `code`."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def one_line(e: Exception) -> str:
    """An exception from reading a file as one short line (YAML and JSON errors span several)."""
    return " ".join(str(e).split())[:200] or e.__class__.__name__


def io_error(path: Path, e: OSError) -> RepcostError:
    """A one-line error for an output that could not be written (disk full, read-only, size limit, …)."""
    return RepcostError(f"cannot write {path}: {(e.strerror or str(e)).lower()}")  # e.g. no space left on device


def report_left_out(prog: str, skipped: list[str], total: int, what: str, allow: bool) -> None:
    """One warning line per item a command left out of its result, then, unless `allow` (--allow-missing), a last
    line and exit status 1: a partial result is written, and the exit status says it is partial."""
    for line in skipped:
        print(f"{prog}: warning: {line}", file=sys.stderr)
    if skipped and not allow:
        print(f"{prog}: error: left out {len(skipped)} of {total} {what} (the warnings above say why); "
              "--allow-missing accepts a partial result", file=sys.stderr)
        sys.exit(1)
