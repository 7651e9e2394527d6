"""The notebook API through a real sweep: load_sweep's rows, load_run's model, data, metrics and arrays."""

from __future__ import annotations

import math
import re

import pytest
import torch

import repcost
from repcost.errors import RepcostError
from helpers import REPO, cli

SWEEP = ["-m", "name=widths", "model=fc", "data=teacher", "model.width=5,10", "seed=0,1", "analysis=spectra",
         "train.phases=[{optimizer:adam,lr:0.001,steps:20}]", "train.progress=false"]


@pytest.fixture(scope="module")
def sweep_cwd(tmp_path_factory):

    cwd = tmp_path_factory.mktemp("api")
    p = cli("repcost-train", *SWEEP, cwd=cwd)
    assert p.returncode == 0, p.stderr
    return cwd


def test_readme_notebook_example_runs(sweep_cwd, monkeypatch, capsys):
    block = re.search(r"## In a notebook.*?```python\n(.*?)```", (REPO / "README.md").read_text(), re.DOTALL).group(1)
    monkeypatch.chdir(sweep_cwd)
    ns: dict = {}
    exec(compile(block, "README.md", "exec"), ns)  # noqa: S102  (the README's own example)
    assert len(ns["rows"]) == 4 and {r["model.width"] for r in ns["rows"]} == {5, 10}
    assert math.isclose(ns["test_mse"], ns["run"].summary["test_loss"], rel_tol=1e-9)


def test_run_object_matches_its_files(sweep_cwd):
    rows = repcost.load_sweep(sweep_cwd / "outputs" / "sweeps" / "widths", finished_only=True)
    assert all(isinstance(r["seed"], int) and isinstance(r["objective"], float) for r in rows)
    row = next(r for r in rows if r["model.width"] == 10)
    run = repcost.load_run(row["path"])
    assert run.config["model"]["width"] == 10 and run.summary["objective"] == row["objective"]
    steps, _ = run.metric("objective")
    assert steps[0] == 0 and len(steps) == len(run.metrics)
    model, data = run.model(), run.data()
    with torch.no_grad():
        train_mse = ((model(data.x_train) - data.y_train) ** 2).sum(1).mean().item()
    assert math.isclose(train_mse, run.summary["train_loss"], rel_tol=1e-9)
    # the Jacobian arrays are taken at analysis.n_points points, one singular-value row per point
    assert run.analysis["jacobian"]["jacobian_s"].shape[0] == run.config["analysis"]["n_points"]
    assert {r["analysis"] for r in run.layers} >= {"weights"}


def test_errors_name_the_problem(tmp_path, sweep_cwd):
    with pytest.raises(RepcostError, match="not a repcost run directory"):
        repcost.load_run(tmp_path)
    with pytest.raises(RepcostError, match="runs.csv not found"):
        repcost.load_sweep(tmp_path)
    run = repcost.load_run(repcost.load_sweep(sweep_cwd / "outputs" / "sweeps" / "widths")[0]["path"])
    with pytest.raises(RepcostError, match="logged: .*objective"):
        run.metric("no_such_metric")
