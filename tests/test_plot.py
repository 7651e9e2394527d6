"""repcost-plot through the real CLI on a tiny sweep, and the aggregation on hand-made rows."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from repcost.plots.sweep import aggregate, sweep_figure
from helpers import cli

SWEEP = ["-m", "name=p", "model=fc", "model.width=4", "data=teacher", "model.depth=2,3", "train.lam=1e-4,1e-2",
         "seed=0,1", "train.phases=[{optimizer:adam,lr:0.001,steps:10}]", "train.progress=false"]


def plot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-m", "repcost.cli.plot", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env, check=False)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:

    cwd = tmp_path_factory.mktemp("plot")
    p = cli("repcost-train", *SWEEP, cwd=cwd)
    assert p.returncode == 0, p.stderr
    return cwd / "outputs" / "sweeps" / "p"


@pytest.mark.slow
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


@pytest.mark.slow
def test_metric_curves_of_runs(sweep, tmp_path):
    runs = sorted(str(d) for d in sweep.iterdir() if (d / "metrics.jsonl").exists())[:2]
    p = plot(*runs, "--y", "train_loss", "--logy", "--out", "curves.png", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "2 curves" in p.stdout and (tmp_path / "curves.png").stat().st_size > 0
    p = plot(*runs, "--y", "nope", cwd=tmp_path)
    assert p.returncode == 2 and "nope" in p.stderr and "train_loss" in p.stderr and "Traceback" not in p.stderr


def test_bad_output_format_and_missing_dir(tmp_path, monkeypatch, capsys):
    sweep = _hand_sweep(tmp_path)
    code, _, err, _ = _main([str(sweep), "--x", "seed", "--y", "steps", "--out", str(tmp_path / "fig.txt")],
                            monkeypatch, capsys)
    assert code == 2 and "fig.txt" in err and "unknown format" in err
    code, _, err, _ = _main([str(tmp_path / "none")], monkeypatch, capsys)
    assert code == 2 and "no such directory" in err


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


# -- in-process: labels, ticks, styles, n per point, corrupt runs, bad --out (hand-made sweeps, no training) -------
def _hand_sweep(tmp_path: Path) -> Path:
    """runs.csv of 3 depths × 2 λ × 2 seeds (one seed missing at depth 4) whose ‖θ‖² does not depend on λ, so the
    two λ lines lie exactly on top of each other."""
    from repcost.rundir import csv_bytes

    rows = [{"job": f"L{d}-lam{lam}-s{s}", "status": "finished", "model.depth": d, "train.lam": lam, "seed": s,
             "param_sq_norm": 10.0 * d + s, "steps": 100 * d, "data.noise": 0.1 * d}
            for d in (2, 3, 4) for lam in (1e-4, 1e-2) for s in (0, 1) if not (d == 4 and s == 1)]
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "runs.csv").write_bytes(csv_bytes(rows))
    return sweep


def _main(argv: list[str], monkeypatch, capsys):
    """repcost-plot's main() in-process; (exit code, stdout, stderr, the figures saved)."""
    from matplotlib.figure import Figure

    from repcost.cli import plot as plot_cli

    saved, real = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (saved.append(self), real(self, *a, **k))[1])
    code = 0
    try:
        plot_cli.main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err, saved


def test_sweep_plot_reads_well(tmp_path, monkeypatch, capsys):
    sweep, png = _hand_sweep(tmp_path), tmp_path / "fig.png"
    code, out, err, (fig,) = _main([str(sweep), "--x", "model.depth", "--y", "param_sq_norm", "--hue", "train.lam",
                                    "--out", str(png)], monkeypatch, capsys)
    assert code == 0 and not err and out.strip() == f"wrote {png} (10 runs)" and png.read_bytes()[:4] == b"\x89PNG"
    ax = fig.axes[0]
    assert ax.get_xlabel() == "depth L" and ax.get_ylabel() == "‖θ‖²" and "‖θ‖² vs depth L" in ax.get_title()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["λ=0.0001 (n=1–2)", "λ=0.01 (n=1–2)"]
    a, b = ax.lines
    assert list(a.get_ydata()) == list(b.get_ydata())  # the lines overlap exactly ...
    assert a.get_marker() != b.get_marker() and a.get_linestyle() != b.get_linestyle()  # ... and both stay visible
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    assert ticks and all(float(t).is_integer() for t in ticks)  # depths: no 2.5


def test_an_unknown_column_suggests_the_nearest(tmp_path, monkeypatch, capsys):
    sweep = _hand_sweep(tmp_path)
    code, out, err, _ = _main([str(sweep), "--x", "model.dpth", "--y", "param_sq_norm", "--out",
                               str(tmp_path / "f.png")], monkeypatch, capsys)
    (line,) = err.strip().splitlines()
    assert code == 2 and "did you mean model.depth?" in line and not out


def test_sweep_plot_label_overrides_integer_y_and_unknown_keys(tmp_path, monkeypatch, capsys):
    sweep, png = _hand_sweep(tmp_path), tmp_path / "fig.svg"
    code, out, _, (fig,) = _main([str(sweep), "--x", "data.noise", "--y", "steps", "--out", str(png),
                                  "--ylabel", "training steps", "--title", "my title"], monkeypatch, capsys)
    assert code == 0 and str(png) in out and png.exists()
    ax = fig.axes[0]
    assert ax.get_xlabel() == "data.noise" and ax.get_ylabel() == "training steps" and ax.get_title() == "my title"
    lo, hi = ax.get_ylim()
    assert all(float(t).is_integer() for t in ax.get_yticks() if lo <= t <= hi)  # steps are integers
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["steps (n=2–4)"]  # depth 4 has one seed


def _curve_run(d: Path, lines: list[str]) -> Path:
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "config.yaml").write_text("{}\n")
    (d / "metrics.jsonl").write_text("".join(ln + "\n" for ln in lines))
    return d


def test_curves_skip_a_corrupt_metrics_file_with_one_warning(tmp_path, monkeypatch, capsys):
    good = [json.dumps({"step": s, "objective": 1.0 / (s + 1)}) for s in range(0, 40, 2)]
    runs = [_curve_run(tmp_path / f"r{i}", good) for i in range(2)]
    bad = _curve_run(tmp_path / "bad", good[:3] + ['{"step": 6, "objec'])  # a write cut short
    png = tmp_path / "c.png"
    code, out, err, (fig,) = _main([*map(str, [runs[0], bad, runs[1]]), "--out", str(png)], monkeypatch, capsys)
    assert code == 1 and out.strip() == f"wrote {png} (2 curves)"  # drawn, and the exit status says one is missing
    line, last = err.strip().splitlines()
    assert line.startswith("repcost-plot: warning:") and str(bad / "metrics.jsonl") in line and "line 4" in line
    assert last.startswith("repcost-plot: error: left out 1 of 3 runs") and "--allow-missing" in last
    code, out, err, _ = _main([*map(str, [runs[0], bad, runs[1]]), "--out", str(png), "--allow-missing"], monkeypatch,
                              capsys)
    assert code == 0 and len(err.strip().splitlines()) == 1
    ax = fig.axes[0]
    assert ax.get_xlabel() == "step" and all(float(t).is_integer() for t in ax.get_xticks())
    assert ax.lines[0].get_marker() != ax.lines[1].get_marker()
    code, out, err, _ = _main([str(bad), "--out", str(tmp_path / "d.png")], monkeypatch, capsys)
    (line,) = err.strip().splitlines()  # the reason said once
    assert code == 2 and line.startswith("repcost-plot: error: no run could be read") and "line 4" in line


def test_curves_of_a_metric_never_finite_are_drawn(tmp_path, monkeypatch, capsys):
    """Runs whose objective is infinite at every logged step (diverged at once) are drawn as any runs are."""
    lines = [json.dumps({"step": s, "objective": math.inf}) for s in range(0, 10, 2)]
    runs, png = [_curve_run(tmp_path / f"r{i}", lines) for i in range(2)], tmp_path / "c.png"
    code, out, err, _ = _main([*map(str, runs), "--out", str(png)], monkeypatch, capsys)
    assert code == 0 and out.strip() == f"wrote {png} (2 curves)" and png.exists() and not err


@pytest.mark.parametrize("out,needle", [("DIR", "is a directory"), ("FILE/fig.png", "is a file, not a directory"),
                                        ("FILE/sub/fig.png", "is a file, not a directory")])
def test_bad_out_is_one_line(tmp_path, monkeypatch, capsys, out, needle):
    sweep = _hand_sweep(tmp_path)
    (tmp_path / "DIR").mkdir()
    (tmp_path / "FILE").write_text("x")
    code, stdout, err, _ = _main([str(sweep), "--x", "seed", "--y", "steps", "--out", str(tmp_path / out)],
                                 monkeypatch, capsys)
    (line,) = err.strip().splitlines()
    assert code == 2 and line.startswith("repcost-plot: error: --out") and needle in line and not stdout
