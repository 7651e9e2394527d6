"""SIGTERM/SIGUSR1 (what SLURM sends before it kills or requeues a job) -> a flag the loop polls."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


class StopFlag:
    """Set by a signal handler; the training loop checkpoints and exits when it sees it."""

    def __init__(self):
        self.signal: int | None = None

    def __bool__(self) -> bool:
        return self.signal is not None


@contextmanager
def stop_on_signals(flag: StopFlag, signals=(signal.SIGTERM, signal.SIGUSR1)):
    """Within the block, the given signals set `flag` instead of killing the process."""
    if threading.current_thread() is not threading.main_thread():
        yield flag  # handlers can only be installed from the main thread (e.g. joblib threads)
        return
    old = {s: signal.getsignal(s) for s in signals}

    def handler(signum, _frame):
        flag.signal = signum

    for s in signals:
        signal.signal(s, handler)
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)
