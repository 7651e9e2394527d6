"""The descent check (analysis/critical.py `lbfgs_descent`): L-BFGS from a model's parameters, against closed forms."""

from __future__ import annotations

import json
import math

import pytest
import torch

from repcost.analysis.critical import critical_point_certificate, lbfgs_descent
from helpers import cli, one_unit_net

LAM = 0.1
X, Y = torch.ones(1, 1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64)
MIN = 2 * LAM - LAM ** 2  # min over (a, w) of (aw − 1)² + λ(a² + w²): aw = 1 − λ, a = w


def test_no_descent_from_the_minimum_and_the_minimum_from_off_it():
    t = math.sqrt(1 - LAM)
    at_min = lbfgs_descent(one_unit_net(t, t), X, Y, "mse", LAM, "one", 50)
    assert math.isclose(at_min["objective_start"], MIN, rel_tol=1e-12) and abs(at_min["descent_rel"]) < 1e-12
    off = one_unit_net(2 * t, t / 2)  # same function, unbalanced: λ(4t² + t²/4) − λ·2t² above the minimum
    before = [p.detach().clone() for p in off.parameters()]
    d = lbfgs_descent(off, X, Y, "mse", LAM, "one", 50)
    start = LAM ** 2 + LAM * t * t * (4 + 0.25)
    assert math.isclose(d["objective_start"], start, rel_tol=1e-12)
    assert math.isclose(d["objective_end"], MIN, rel_tol=1e-9)
    assert math.isclose(d["descent_rel"], (start - MIN) / start, rel_tol=1e-8)
    assert all(torch.equal(a, b) for a, b in zip(before, off.parameters()))  # the caller's model is untouched
    cert = critical_point_certificate(off, X, Y, "mse", LAM, "one", descent_evals=50)
    assert math.isclose(cert["descent_rel"], d["descent_rel"], rel_tol=1e-12) and 1 <= cert["descent_evals"] <= 60


def test_progress_is_reported_and_the_objective_never_rises():
    seen = []
    lbfgs_descent(one_unit_net(0.3, 2.0), X, Y, "mse", LAM, "one", 40, every=5,
                  on_progress=lambda n, m, obj: seen.append((n, obj)))
    assert len(seen) >= 2 and all(b[0] > a[0] for a, b in zip(seen, seen[1:]))
    assert all(b[1] <= a[1] + 1e-15 for a, b in zip(seen, seen[1:]))
    assert math.isclose(seen[-1][1], MIN, rel_tol=1e-9)


@pytest.mark.slow  # an end-to-end CLI run of several seconds
def test_certify_descent_through_the_cli(tmp_path):
    d = tmp_path / "run"
    p = cli("repcost-train", "model=fc", "model.depth=3", "model.width=8", "data=teacher", "data.n_train=40",
            "data.n_test=10", "train=adam", "train.phases.0.steps=100", "analysis.critical.descent_evals=30",
            f"hydra.run.dir={d}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    s = json.loads((d / "summary.json").read_text())
    assert s["critical.descent_rel"] > 0 and 1 <= s["critical.descent_evals"] <= 60  # 100 Adam steps are not a minimum
    assert "descent check: L-BFGS lowers the objective" in p.stdout + p.stderr
