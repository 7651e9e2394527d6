"""repcost-plot through the real CLI on a tiny sweep, and the aggregation on hand-made rows."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from repcost.plots.sweep import aggregate, sweep_figure

SWEEP = ["-m", "name=p", "model=fc", "model.width=4", "data=teacher", "model.depth=2,3", "train.lam=1e-4,1e-2",
         "seed=0,1", "train.phases=[{optimizer:adam,lr:0.001,steps:10}]", "train.progress=false"]


def plot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-m", "repcost.cli.plot", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env, check=False)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    from conftest import cli

    cwd = tmp_path_factory.mktemp("plot")
    p = cli("repcost-train", *SWEEP, cwd=cwd)
    assert p.returncode == 0, p.stderr
    return cwd / "outputs" / "sweeps" / "p"


def test_sweep_plot_png_and_pdf(sweep, tmp_path):
    p = plot(str(sweep), "--x", "model.depth", "--y", "objective", "--hue", "train.lam", "--logy",
             "--out", "fig.png", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "fig.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "8 runs" in p.stdout
    p = plot(str(sweep), "--x", "train.lam", "--y", "param_sq_norm", "--logx", "--out", "sub/fig.pdf", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "sub" / "fig.pdf").read_bytes()[:4] == b"%PDF"


def test_unknown_column_is_one_line_listing_the_columns(sweep, tmp_path):
    p = plot(str(sweep), "--x", "model.depth", "--y", "no_such_column", cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    line, = p.stderr.strip().splitlines()
    assert "no_such_column" in line and "model.depth" in line and "objective" in line
    assert not (tmp_path / "plot.png").exists()


def test_metric_curves_of_runs(sweep, tmp_path):
    runs = sorted(str(d) for d in sweep.iterdir() if (d / "metrics.jsonl").exists())[:2]
    p = plot(*runs, "--y", "train_loss", "--logy", "--out", "curves.png", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "2 curves" in p.stdout and (tmp_path / "curves.png").stat().st_size > 0
    p = plot(*runs, "--y", "nope", cwd=tmp_path)
    assert p.returncode == 2 and "nope" in p.stderr and "train_loss" in p.stderr and "Traceback" not in p.stderr


def test_bad_output_format_and_missing_dir(tmp_path, sweep):
    p = plot(str(sweep), "--x", "seed", "--y", "objective", "--out", "fig.txt", cwd=tmp_path)
    assert p.returncode == 2 and "fig.txt" in p.stderr
    p = plot(str(tmp_path / "none"), cwd=tmp_path)
    assert p.returncode == 2 and "no such directory" in p.stderr


def test_aggregate_mean_band_and_dropped_rows():
    rows = [{"x": 1, "y": 1.0, "h": "a"}, {"x": 1, "y": 3.0, "h": "a"}, {"x": 2, "y": 5.0, "h": "a"},
            {"x": 2, "y": float("nan"), "h": "a"}, {"x": 1, "y": None, "h": "b"}, {"x": 1, "y": 4.0, "h": "b"}]
    a, b = aggregate(rows, "x", "y", hue="h")
    assert a.label == "h=a" and a.x == [1, 2] and list(a.mean) == [2.0, 5.0]
    assert list(a.lo) == [1.0, 5.0] and list(a.hi) == [3.0, 5.0] and list(a.n) == [2, 1]
    assert b.x == [1] and list(b.mean) == [4.0]
    fig = sweep_figure([a, b], "x", "y", logy=True)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and math.isclose(ax.lines[0].get_ydata()[0], 2.0)
