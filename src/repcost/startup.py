"""repcost-train's start-up: stop signals handled from the first line, and nothing left behind by an interrupted start.

Between the process start and the moment a run trains, Hydra composes the config and creates the run directory
(with its log file), and repcost validates, locks the directory and writes `.hydra/`. Unguarded, a SIGTERM there kills
the process outright and can leave a directory holding only an empty `train.log`. `startup_guard` installs
handlers before Hydra runs: a signal in that window raises `StartupInterrupted` (one line, exit 128 + signal), and
the current run directory is cleaned if it holds only start-up leftovers (`rundir.remove_startup_litter`).

Once a run's directory is ready (`.hydra/` written), `training_begins` gives the signals back to what was there
before, so the training loop's own handlers (`repcost.train.preempt.stop_on_signals`) take over unchanged: they
treat any Python handler already installed as a launcher's. `job_ended` re-arms the guard for the next job of an
in-process multirun.

Python's cyclic garbage collector costs a run's start ~0.3 s of full collections, each traversing every object
torch's import created, and its exit ~0.4 s more. `load_torch` imports torch with the collector paused and then
freezes (`gc.freeze`) what is loaded, objects that live as long as the process, and again at exit, so the
interpreter's last collection skips them.
"""

from __future__ import annotations

import atexit
import gc
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import FatalError

GUARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)


class StartupInterrupted(FatalError):
    """A stop signal before training began: nothing was trained."""

    def __init__(self, signum: int):
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name} during start-up, before training began: nothing was trained; "
                         "relaunch the same command", code=128 + signum)
        self.signum = signum


_active = False
_saved: dict[int, object] = {}
_run_dir: Path | None = None  # the directory the current start-up is setting up (noted by the CLI's callbacks)


def _raise(signum: int, _frame: object) -> None:
    raise StartupInterrupted(signum)


def _arm() -> None:
    if not _active or _saved or threading.current_thread() is not threading.main_thread():
        return
    for s in GUARDED:
        _saved[s] = signal.signal(s, _raise)


def training_begins() -> None:
    """The run's directory is ready: the signals go back to their previous handlers (the training installs its own)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s, old in list(_saved.items()):
        signal.signal(s, old if old is not None else signal.SIG_DFL)
    _saved.clear()


def job_ended() -> None:
    """A job of an in-process multirun ended: guard the next job's start-up again."""
    _arm()


def note_run_dir(path: Path | str) -> None:
    """The run (or sweep job) directory this start-up is about to set up: cleaned if the start is interrupted."""
    global _run_dir
    _run_dir = Path(path)


@contextmanager
def startup_guard() -> Iterator[None]:
    """Around a CLI's work: stop signals raise StartupInterrupted until `training_begins`; an interrupted start
    leaves no directory that holds only start-up leftovers."""
    global _active
    _active = True
    _arm()
    try:
        yield
    except StartupInterrupted:
        training_begins()  # a second signal while cleaning up gets the default action
        if _run_dir is not None:
            from .rundir import remove_startup_litter  # torch-free start-up: rundir loads torch

            remove_startup_litter(_run_dir)
        raise
    finally:
        _active = False
        note_run_dir_clear()
        training_begins()


def note_run_dir_clear() -> None:
    global _run_dir
    _run_dir = None


_started_torch = False


def started_torch() -> bool:
    """Whether `load_torch` imported torch, i.e. this is a fresh repcost-train process (not a notebook or a test)."""
    return _started_torch


def load_torch() -> None:
    """In a fresh repcost-train process: import torch with the cyclic garbage collector paused, move everything
    loaded so far out of its reach, and have the rest frozen at exit too.

    The import makes ~10^5 long-lived objects: collected as usual, the import itself and every later one (Hydra,
    the certificate's solvers) run full collections over them (~0.3 s together), and the interpreter's last
    collection at exit visits every object (~0.4 s). Where torch is loaded already (the CLI called in a notebook
    or a test), nothing is done: the host process's objects are not frozen."""
    global _started_torch
    if "torch" in sys.modules:
        return
    _started_torch = True
    enabled = gc.isenabled()
    gc.disable()
    try:
        import torch  # noqa: F401
    finally:
        if enabled:
            gc.enable()
    gc.freeze()
    atexit.register(gc.freeze)  # runs after the command's files are closed; atexit handlers still run
