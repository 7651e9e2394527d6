"""Fixtures shared by the tests; helpers they import by name live in helpers.py."""

from __future__ import annotations

import os

import pytest
import torch
from helpers import cli


@pytest.fixture
def run_cli():
    """The `cli` helper as a fixture."""
    return cli


if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs two workers on two cores: one thread each
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
