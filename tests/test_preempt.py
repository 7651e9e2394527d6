"""Signals under a launcher: repcost catches the launcher's checkpoint signal first and hands it back after
its checkpoint; the launcher's SIGTERM handler stays in charge; without a launcher every signal is repcost's."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

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


def _fake_scontrol(tmp_path, monkeypatch, body: str) -> None:
    exe = tmp_path / "scontrol"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def _hand_back_to_a_requeuing_launcher() -> None:
    """A launcher whose USR2 handler requeues the way submitit's does (check_call of `scontrol requeue`)."""
    old = signal.getsignal(signal.SIGUSR2)
    signal.signal(signal.SIGUSR2, lambda s, f: subprocess.check_call(["scontrol", "requeue", "42"]))
    try:
        flag = StopFlag()
        with stop_on_signals(flag):
            _send(signal.SIGUSR2)
        flag.hand_back()
    finally:
        signal.signal(signal.SIGUSR2, old)


def test_scontrol_killed_by_the_requeues_own_sigterm_is_a_requeue(tmp_path, monkeypatch):
    """SLURM sends SIGTERM to every process of a job it requeues, scontrol included when it is slow to exit:
    the run exits as after any requeue instead of failing the job."""
    _fake_scontrol(tmp_path, monkeypatch, "kill -TERM $$")
    with pytest.raises(SystemExit):
        _hand_back_to_a_requeuing_launcher()


def test_a_refused_requeue_still_fails(tmp_path, monkeypatch):
    _fake_scontrol(tmp_path, monkeypatch, "exit 1")
    with pytest.raises(subprocess.CalledProcessError):
        _hand_back_to_a_requeuing_launcher()


def test_a_compile_killed_by_the_stop_signal_is_a_preemption(tmp_path, monkeypatch):
    """SLURM signals every process of a job, a compiler child too: the failure that follows a stop signal leaves the
    run preempted (no error.txt), and the relaunch finishes it with the uninterrupted run's numbers."""
    from omegaconf import OmegaConf

    from repcost.config import compose_config, validate
    from repcost.train.engine import Engine
    from repcost.train.run import train_run

    cfg = compose_config(["train.progress=false", "train.phases.0.steps=30", "train.phases.1.steps=0"])
    spec, plain = validate(cfg), OmegaConf.to_container(cfg, resolve=True)
    ref = train_run(spec, plain, tmp_path / "ref")

    def killed_compile(self):
        _send(signal.SIGTERM)
        raise RuntimeError("CppCompileError: C++ compile error\n(g++ killed)")

    with monkeypatch.context() as m:
        m.setattr(Engine, "run", killed_compile)
        stopped = train_run(spec, plain, tmp_path / "run")
    assert stopped["status"] == "preempted" and stopped["signal"] == signal.SIGTERM
    assert not (tmp_path / "run" / "error.txt").exists() and not (tmp_path / "run" / "FINISHED").exists()
    done = train_run(spec, plain, tmp_path / "run")
    assert done["status"] == "finished" and done["objective"] == ref["objective"]
