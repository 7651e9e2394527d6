"""The thread count of a run (repcost.threads): the rule, its validation, library use and sweeps."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from repcost import threads
from repcost.errors import ConfigError



def test_threads_rule(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "cores_available", lambda: 8)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 8)  # the process may use every core: the run queue counts
    monkeypatch.setattr(threads, "busy_elsewhere", lambda *_: 0)
    assert threads.choose(3)[0] == 3  # an explicit setting wins over everything
    assert threads.choose("auto", work=threads.SMALL_WORK * 10)[0] == 8
    assert threads.choose("auto", work=threads.SMALL_WORK * 10, concurrency=3)[0] == 8 // 3
    assert threads.choose("auto", work=threads.SMALL_WORK / 10)[0] == 1  # small model: one thread
    monkeypatch.setattr(threads, "busy_elsewhere", lambda *_: 6)
    assert threads.choose("auto", work=threads.SMALL_WORK * 10)[0] == 2  # 8 cores, 6 kept busy by others
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 16)  # a share of a bigger machine: its run queue says nothing
    assert threads.choose("auto", work=threads.SMALL_WORK * 10)[0] == 8
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert threads.choose("auto", work=threads.SMALL_WORK / 10) == (5, "OMP_NUM_THREADS")
    assert threads.choose(2)[0] == 2


def test_threads_setting_is_validated():
    from repcost.config import compose_config, validate

    assert validate(compose_config(["threads=2", "device=cpu"])).threads == 2
    assert validate(compose_config(["device=cpu"])).threads == "auto"
    for bad in ("0", "two", "true"):
        with pytest.raises(ConfigError, match=r"threads=.*allowed: auto or an integer >= 1"):
            validate(compose_config([f"threads={bad}", "device=cpu"]))


def test_threads_are_left_alone_for_library_use_and_shared_in_sweeps(monkeypatch):
    from hydra.types import RunMode

    from repcost.train.job import launch_concurrency

    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_managed", {})
    assert threads.fit_to_model(10, 10) is None and torch.get_num_threads() == before  # no CLI job: untouched
    hc = OmegaConf.create({"mode": RunMode.MULTIRUN, "launcher": {"n_jobs": 2}})
    assert launch_concurrency(hc) == 2
    assert launch_concurrency(OmegaConf.create({"mode": RunMode.RUN, "launcher": {"n_jobs": 2}})) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", str(before))  # an explicit choice beats the sweep's share
    try:
        assert threads.apply("auto", concurrency=2) == (before, "OMP_NUM_THREADS")
        assert threads.fit_to_model(10, 10) == (before, "OMP_NUM_THREADS")
        monkeypatch.delenv("OMP_NUM_THREADS")
        assert threads.fit_to_model(10, 10) == (1, "small model") and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)



def _work(overrides: list[str]) -> float:
    """samples × parameters of a config's full-batch step, from its real data and model."""
    from repcost.config import compose_config, validate
    from repcost.data import load_data
    from repcost.models import build_model

    spec = validate(compose_config([*overrides, "device=cpu"]))
    data = load_data(spec.data)
    model = build_model(spec.model, data.d_in, data.d_out, spec.seed, data.x_train)
    return float(data.x_train.shape[0] * sum(p.numel() for p in model.parameters()))


def test_the_small_model_rule_keeps_the_demo_on_one_thread_and_lets_the_cores_decide_for_the_mnist_net(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "cores_available", lambda: 2)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    demo, mnist = _work([]), _work(["experiment=jacot22-fig1"])
    assert demo < threads.SMALL_WORK < mnist
    monkeypatch.setattr(threads, "busy_elsewhere", lambda *_: 0)
    assert threads.choose("auto", demo) == (1, "small model")
    assert threads.choose("auto", mnist)[0] == 2  # an idle 2-core machine: both cores
    monkeypatch.setattr(threads, "busy_elsewhere", lambda *_: 1)
    assert threads.choose("auto", mnist)[0] == 1  # beside one busy process: the free core


def test_this_process_threads_are_not_counted_as_busy_elsewhere(monkeypatch):
    import hashlib
    import threading

    stop = threading.Event()

    def hash_away() -> None:  # hashlib releases the GIL on large buffers: this thread runs beside the test
        block = bytes(1 << 22)
        while not stop.is_set():
            hashlib.sha256(block).digest()

    worker = threading.Thread(target=hash_away)
    worker.start()
    try:
        assert max(threads.own_running_threads() for _ in range(50)) >= 2
    finally:
        stop.set()
        worker.join()
    assert threads.own_running_threads() >= 1  # the reading thread itself

    class Proc(type(Path())):  # /proc/loadavg: 4 runnable tasks on the machine
        def read_text(self, *a, **k) -> str:
            return "0.50 0.40 0.30 4/120 999\n" if str(self) == "/proc/loadavg" else super().read_text(*a, **k)

    monkeypatch.setattr(threads, "Path", Proc)
    monkeypatch.setattr(threads, "own_running_threads", lambda: 3)  # 3 of them ours (e.g. spinning OpenMP workers)
    assert threads.busy_elsewhere() == 1
