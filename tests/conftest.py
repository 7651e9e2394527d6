"""Shared fixtures: small models and data, and a runner for the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def cli(prog: str, *args: str, cwd: Path, timeout: int = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a repcost console script (as `python -m`) in `cwd`; returns the completed process."""
    module = {"repcost-train": "repcost.cli.train", "repcost-analyze": "repcost.cli.analyze",
              "repcost-collect": "repcost.cli.collect"}[prog]
    e = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=e)


@pytest.fixture
def run_cli():
    """The `cli` helper as a fixture."""
    return cli


if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs two workers on two cores: one thread each
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _float64_default():
    torch.manual_seed(0)
    yield


class StopAfter:
    """A stop flag (repcost.train.preempt.StopFlag's interface) that 'receives SIGTERM' after `n` polls, one per step."""

    def __init__(self, n: int):
        self.n, self.signal = n, None

    def __bool__(self) -> bool:
        self.n -= 1
        if self.n < 0:
            self.signal = 15
        return self.signal is not None
