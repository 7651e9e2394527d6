"""repcost-train's start-up: a stop signal before training begins ends the command in one line and leaves no
directory that holds only start-up files.

Between the process start and the moment a run trains, Hydra composes the config and creates the run directory
(with its log file), and repcost validates, locks the directory and writes `.hydra/`. Unguarded, a SIGTERM there kills
the process outright and can leave a directory holding only an empty `train.log`. `startup_guard` installs
handlers before Hydra runs: a signal in that window raises `StartupInterrupted` (one line, exit 128 + signal), and
the directory being set up (`note_run_dir`) is removed if it holds only start-up files
(`rundir.remove_startup_litter`). A run refused before training (`forget_refused_run`) leaves none either: its
directory goes if this command created it, with the empty folders above it that the command created; a directory
that held anything else (a checkpoint, metrics, results) is never touched.

Once a run's directory is ready (`.hydra/` written), `training_begins` gives the signals back to their previous
handlers, so the training loop's own (`repcost.train.preempt.stop_on_signals`) take over unchanged: they treat any
Python handler already installed as a launcher's. `job_ended` guards the next job of an in-process multirun.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import FatalError
from .train.preempt import STOP_SIGNALS  # the signals the training stops on are the ones guarded before it


class StartupInterrupted(FatalError):
    """A stop signal before training began: nothing was trained."""

    def __init__(self, signum: int):
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name} during start-up, before training began: nothing was trained; "
                         "relaunch the same command", code=128 + signum)


_guarding = False  # inside `startup_guard`
_saved: dict[int, object] = {}  # the handlers replaced while a start-up is guarded
_run_dir: Path | None = None  # the directory the current start-up is setting up
_existing: set[Path] | None = None  # the folders on the way to it that existed when it was noted (None: it did)


def _raise(signum: int, _frame: object) -> None:
    raise StartupInterrupted(signum)


def job_ended() -> None:
    """A job ended (the next job of an in-process multirun starts): guard its start-up."""
    # a launcher's threads may run jobs too: only the main thread may set signal handlers
    if _guarding and not _saved and threading.current_thread() is threading.main_thread():
        for s in STOP_SIGNALS:
            _saved[s] = signal.signal(s, _raise)


def training_begins() -> None:
    """The run's directory is ready: the signals go back to their previous handlers (the training installs its own)."""
    while _saved and threading.current_thread() is threading.main_thread():
        s, old = _saved.popitem()
        signal.signal(s, old if old is not None else signal.SIG_DFL)


def note_run_dir(path: Path | str | None) -> None:
    """The run (or sweep job) directory this start-up is about to set up: removed if the start is interrupted."""
    global _run_dir, _existing
    _run_dir = None if path is None else Path(os.path.realpath(path))  # (Path.resolve raises on a symlink loop)
    _existing = None if _run_dir is None or _run_dir.exists() else {p for p in _run_dir.parents if p.is_dir()}


def forget_refused_run() -> None:
    """A run refused before training: remove its directory if this command created it (noted before it existed) and
    it holds nothing but start-up files; then the empty folders above it that the command created."""
    from .rundir import remove_startup_litter  # rundir loads torch: not before a run needs it

    if _existing is None or not remove_startup_litter(_run_dir):  # None: no directory noted, or it existed before
        return
    with contextlib.suppress(OSError):  # (a folder that holds anything stays, and the folders above it)
        for parent in _run_dir.parents:
            if parent in _existing:
                break
            os.rmdir(parent)  # only an empty folder


@contextmanager
def startup_guard() -> Iterator[None]:
    """Around a CLI's work: stop signals raise StartupInterrupted until `training_begins`; an interrupted start
    leaves no directory that holds only start-up files."""
    global _guarding
    _guarding = True
    job_ended()
    try:
        yield
    except StartupInterrupted:
        training_begins()  # a second signal while cleaning up gets the previous action
        if _run_dir is not None:
            from .rundir import remove_startup_litter  # rundir loads torch: not before a run needs it

            remove_startup_litter(_run_dir)
        raise
    finally:
        _guarding = False
        note_run_dir(None)
        training_begins()
