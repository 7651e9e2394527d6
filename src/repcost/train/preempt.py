"""SIGTERM/SIGUSR1/SIGUSR2 (what SLURM sends before it kills or requeues a job) and SIGINT (Ctrl-C) -> a flag
the loop polls: the run stops at the next step and writes its checkpoint.

Ctrl-C: the run's outcome names SIGINT, and `Interrupted` then ends the whole command (a sweep too) with one line
and exit status 130; a second Ctrl-C before the run has stopped raises KeyboardInterrupt at once (the checkpoint
writes are atomic).

A launcher's handlers stay in charge. submitit (the `slurm` and `local_submitit` launchers) installs Python
handlers before the job runs: on its checkpoint signal (USR2 unless SUBMITIT_PREEMPT_SIGNAL says otherwise) it
pickles the job, requeues it with `scontrol requeue` and exits; its SIGTERM handler (it ignores SIGTERM on
purpose) stays installed.
Were repcost only to take USR1/USR2 over, the run would checkpoint and *return*, submitit would record that as the
job's result, and the sweep would end with the job preempted while SLURM restarts it behind its back. So repcost
catches them, stops at the next step, writes its checkpoint, then hands the signal back (`StopFlag.hand_back`: the
launcher requeues and exits), and the requeued job resumes from the very step it was signalled at.

SLURM answers a requeue by sending SIGTERM to every process of the job, `scontrol` among them if it has not exited
yet: submitit then takes the requeue for a failure (CalledProcessError) and the sweep records the job as failed
while SLURM restarts it. `hand_back` treats that one failure as the requeue it is and exits as submitit would.

SIGCONT gets its default action (continue a stopped process) during training. submitit's handler for it only
logs, and SLURM sends it together with the job's signal: a USR2 handled while that logging call runs raises
submitit's final "timed-out too many times" error inside `logging`, which swallows it (Handler.handleError); the
job then trains on into its hard time limit, is killed without a result, and the whole sweep fails.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run; its checkpoint is written and its line logged: the command ends (exit status 130)."""


class StopFlag:
    """Set by a signal handler; the training loop checkpoints and exits when it sees it."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.chained: dict[int, object] = {}  # signal -> the launcher's handler, called by hand_back()

    def __bool__(self) -> bool:
        return self.signal is not None

    def hand_back(self) -> None:
        """Once the run's checkpoint is written: give the signal to the launcher that owned it (it may exit)."""
        handler = self.chained.get(self.signal)
        if not callable(handler):
            return
        try:
            handler(self.signal, None)
        except subprocess.CalledProcessError as e:
            # `scontrol requeue` killed by the SIGTERM that SLURM sends the job it is requeueing: the requeue was
            # taken, so submitit's own exit after a requeue (see the module docstring)
            if list(e.cmd)[:2] != ["scontrol", "requeue"] or e.returncode != -signal.SIGTERM:
                raise
            sys.exit(-1)


@contextmanager
def stop_on_signals(flag: StopFlag) -> Iterator[StopFlag]:
    """Within the block, `STOP_SIGNALS` set `flag` instead of killing the process.

    A launcher's SIGTERM handler keeps it; a launcher's USR1/USR2 handler is chained (see the module docstring).
    """
    if threading.current_thread() is not threading.main_thread():
        yield flag  # handlers can only be installed from the main thread (e.g. joblib threads)
        return
    old = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    # a launcher's: a Python function someone installed (submitit's); SIG_DFL, SIG_IGN, None (not installed from
    # Python) and Python's own SIGINT handler are nobody's. SIGTERM a launcher installed a handler for (submitit:
    # ignore it) stays the launcher's; its checkpoint signals are caught first and handed back after the checkpoint
    launchers = {s: h for s, h in old.items() if callable(h) and h is not signal.default_int_handler}
    ours = [s for s in STOP_SIGNALS if s not in launchers or s != signal.SIGTERM]
    flag.chained = {s: h for s, h in launchers.items() if s in ours}

    def handler(signum: int, _frame: object) -> None:
        if signum == signal.SIGINT and flag.signal == signal.SIGINT:  # Ctrl-C twice: stop now
            raise KeyboardInterrupt
        flag.signal = signum

    old_cont = signal.signal(signal.SIGCONT, signal.SIG_DFL)  # see the module docstring
    for s in ours:
        signal.signal(s, handler)
    try:
        yield flag
    finally:
        for s in ours:
            signal.signal(s, old[s])
        signal.signal(signal.SIGCONT, old_cont if old_cont is not None else signal.SIG_DFL)
