"""Signals under a launcher: repcost catches the launcher's checkpoint signal first and hands it back after
its checkpoint; the launcher's SIGTERM handler stays in charge; without a launcher every signal is repcost's."""

from __future__ import annotations

import os
import signal
import time

from repcost.train.preempt import StopFlag, stop_on_signals


def _send(sig: int) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(0.05)  # let the handler run


def test_launcher_signal_is_caught_then_handed_back():
    calls = []
    old = {s: signal.getsignal(s) for s in (signal.SIGUSR2, signal.SIGTERM)}
    signal.signal(signal.SIGUSR2, lambda s, f: calls.append(("launcher", s)))
    signal.signal(signal.SIGTERM, lambda s, f: calls.append(("launcher-term", s)))
    try:
        flag = StopFlag()
        with stop_on_signals(flag):
            _send(signal.SIGUSR2)
            assert flag.signal == signal.SIGUSR2 and calls == []  # the run stops first, the launcher waits
            _send(signal.SIGTERM)
            assert calls == [("launcher-term", signal.SIGTERM)]  # e.g. submitit ignoring SIGTERM on purpose
        assert signal.getsignal(signal.SIGUSR2) is not None and calls[-1][0] == "launcher-term"
        flag.hand_back()  # after the checkpoint: the launcher requeues (and would exit)
        assert calls[-1] == ("launcher", signal.SIGUSR2)
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def test_without_a_launcher_every_stop_signal_is_repcosts():
    for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
        flag = StopFlag()
        with stop_on_signals(flag):
            _send(sig)
        assert flag.signal == sig and flag.chained == {}
        flag.hand_back()  # nothing to hand back: a no-op
