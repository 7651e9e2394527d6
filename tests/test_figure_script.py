"""A figure script end to end on tiny runs: it trains its sweep, writes its PNG and CSV, one row per run."""

from __future__ import annotations

import csv
import runpy
import sys
import pytest

from repcost.paths import REPO_ROOT


@pytest.mark.slow
def test_savarese_parallel_script_writes_png_and_csv(tmp_path, monkeypatch, capsys):
    out = tmp_path / "figs"
    # the script runs in this process (its sweep still runs `repcost-train -m` as a subprocess, in tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(sys, "argv", ["savarese19-parallel.py", "--workdir", str(tmp_path), "--out", str(out),
                                      "--set", "model.depth=2,3", "model.n_subnets=4", "model.width=3",
                                      "train.phases.0.steps=10", "train.phases.1.steps=2", "train.phases.2.steps=0"])
    runpy.run_path(str(REPO_ROOT / "experiments" / "savarese19-parallel.py"), run_name="__main__")
    assert "Thm C.3" in capsys.readouterr().out  # the paper's claim is printed next to the numbers
    png, table = out / "savarese19-parallel.png", out / "savarese19-parallel.csv"
    assert png.stat().st_size > 1000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(table, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["depth_L"]) for r in rows] == [2, 3]
    for r in rows:
        assert int(r["n_subnets_k"]) == 4 and int(r["steps"]) == 12
        assert 0 <= int(r["active_subnets"]) <= 4
        # AM–GM: C_L(θ) ≥ ‖ᾱ‖_{2/L}^{2/L} for any parameters (Savarese Thm C.1 proof)
        assert float(r["C_L"]) >= float(r["l2L_quasinorm"]) * (1 - 1e-9)
    # the runs went to the work dir, not the repository's outputs/
    assert [p.name.split("--")[0] for p in (tmp_path / "outputs" / "sweeps").iterdir()] == ["savarese19-parallel-quick"]


def test_full_only_selects_paper_presets_per_sweep():
    """--full makes every sweep paper-size; --full-only only the named presets (one panel of a figure)."""
    from repcost.figures import figure_args, is_full, preset_name

    ap = figure_args("x")
    a = ap.parse_args(["--full-only", "jacot22-fig2-teacher"])
    assert is_full(a, "jacot22-fig2-teacher") and not is_full(a, "jacot22-fig2")
    assert preset_name("jacot22-fig2", is_full(a, "jacot22-fig2")) == "jacot22-fig2-quick"
    b = ap.parse_args(["--full"])
    assert is_full(b, "jacot22-fig2") and is_full(b, "jacot22-fig2-teacher")
    assert not any(is_full(ap.parse_args([]), p) for p in ("jacot22-fig2", "jacot22-fig2-teacher"))


@pytest.mark.slow
def test_figure_script_bad_override_ends_with_one_line(tmp_path):
    """A sweep whose jobs all fail ends the figure script with exit 2 and a one-line error, no traceback."""
    import subprocess

    p = subprocess.run([sys.executable, str(REPO_ROOT / "experiments" / "savarese19-parallel.py"),
                        "--workdir", str(tmp_path / "new"), "--out", str(tmp_path), "--set", "model.width=-1"],
                       capture_output=True, text=True, timeout=120, env={**__import__("os").environ, "MPLBACKEND": "Agg"})
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("error: 4 job(s) of") and "model.width=-1; allowed: a positive integer" in last


@pytest.mark.slow
def test_forces_script_on_a_collapsed_net_ends_with_one_line(tmp_path):
    """jacot22-fig1 on a net that weight decay shrank to zero says so (exit 2) instead of a singular solve."""
    import subprocess

    p = subprocess.run([sys.executable, str(REPO_ROOT / "experiments" / "jacot22-fig1.py"),
                        "--workdir", str(tmp_path / "w"), "--out", str(tmp_path), "--set", "train.lam=2",
                        "train.phases.0.steps=300", "train.phases.0.lam_factor=1", "train.phases.1.steps=300"],
                       capture_output=True, text=True, timeout=300, env={**__import__("os").environ, "MPLBACKEND": "Agg"})
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert "inactive on the data" in last and "use a smaller λ" in last


@pytest.mark.slow
def test_make_figures_prints_one_line_per_figure(capsys):
    """`make figures`' driver on a real figure script: one line with the verdict, its time and the line behind it;
    the script's whole printout in its log."""
    from repcost.figures import FIG_DIR, run_all

    assert run_all.main(["--only", "ongie22-fig4"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert line.split()[:2] in (["ongie22-fig4", "pass"], ["ongie22-fig4", "fail"]) and " s  " in line
    log = (FIG_DIR / "quick" / "ongie22-fig4.log").read_text()
    assert line.split(" s  ", 1)[1] in log and "verdict: " in log


def test_a_figure_that_fails_to_run_is_one_error_line():
    from repcost.figures.run_all import summary_line

    out = "training…\nerror: jacot23-fig3: no finished runs in its sweep\n"
    assert summary_line("jacot23-fig3", out, 3.0, 2).split()[1] == "error"
    assert summary_line("jacot23-fig3", out, 3.0, 2).endswith("error: jacot23-fig3: no finished runs in its sweep")
