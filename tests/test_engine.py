"""The engine's schedules and stop rules against closed forms, and the critical-point certificate."""

from __future__ import annotations

import json
import math

import pytest
import torch
from omegaconf import OmegaConf

from repcost.analysis.critical import critical_point_certificate, weighted_gap
from repcost.config import compose_config, validate
from repcost.errors import RepcostError
from repcost.train.run import train_run
from repcost.train.optim import lr_factor
from helpers import one_unit_net


@pytest.mark.parametrize("schedule", ["constant", "cosine", "linear", "exponential"])
def test_lr_schedules_exact(schedule):
    lr, r, n = 0.3, 0.01, 101  # t = step / (n − 1): steps 0, 50, 100 are t = 0, ½, 1
    expect = {"constant": (lr, lr, lr), "cosine": (lr, lr * (r + (1 - r) / 2), lr * r),
              "linear": (lr, lr * (1 + r) / 2, lr * r), "exponential": (lr, lr * math.sqrt(r), lr * r)}[schedule]
    got = tuple(lr * lr_factor(schedule, r, s, n) for s in (0, 50, 100))
    assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(got, expect)), (got, expect)
    if schedule == "cosine":  # a quarter of the way: cos(π/4) = 1/√2
        assert math.isclose(lr * lr_factor(schedule, r, 25, n), lr * (r + (1 - r) * 0.5 * (1 + 2 ** -0.5)), rel_tol=1e-12)


def test_logged_lr_follows_the_schedule(tmp_path):
    cfg = compose_config(["train.progress=false", "train=gd", "train.phases.0.steps=21", "train.phases.0.lr=0.05",
                          "train.phases.0.schedule=exponential", "+train.phases.0.final_lr_ratio=0.1",
                          "train.log_every=5"])
    train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / "r")
    for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "lr" in rec:  # the last line is the state after the last step, which has no learning rate
            assert math.isclose(rec["lr"], 0.05 * 0.1 ** (rec["step"] / 20), rel_tol=1e-12)
    assert rec["step"] == 21 and "lr" not in rec


def test_certificate_of_a_known_critical_point_and_a_rescaled_one():
    """x = 1, y = 1, objective (aw − 1)² + λ(a² + w²): a = w = √(1 − λ) is a critical point (balanced, ∇ = 0).
    Rescaling the unit (a, w) -> (2a, w/2) keeps the function and the data loss but leaves the critical point."""
    lam = 0.1
    x, y = torch.ones(1, 1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64)
    t = math.sqrt(1 - lam)
    cert = critical_point_certificate(one_unit_net(t, t), x, y, "mse", lam, "one")
    assert cert["grad_norm"] < 1e-12 and cert["unit_gap"] < 1e-12 and cert["critical_point"]
    off = critical_point_certificate(one_unit_net(2 * t, t / 2), x, y, "mse", lam, "one")
    assert math.isclose(off["unit_gap"], (4 - 0.25) / 4, rel_tol=1e-12)  # Σ|in − out| / Σ max = (4t² − t²/4)/4t²
    assert off["stationarity"] > 0.5 and not off["critical_point"]
    g_a = 2 * (4 * t * t / 4 - 1) * (t / 2) + 2 * lam * 2 * t  # ∂/∂a of (a·w − 1)² + λ(a² + w²) at (2t, t/2)
    g_w = 2 * (t * t - 1) * (2 * t) + 2 * lam * t / 2
    assert math.isclose(off["grad_norm"], math.hypot(g_a, g_w), rel_tol=1e-10)


def test_weighted_gap_ignores_massless_units():
    assert weighted_gap([1.0, 1e-20], [1.0, 3e-20]) < 1e-19
    assert math.isclose(weighted_gap([1.0, 0.0], [0.5, 0.0]), 0.5)


def test_grad_tol_stops_at_the_first_check_below_it(tmp_path):
    """The run stops at the first check where ‖∇objective‖/‖θ‖ <= grad_tol; the certificate, computed
    independently in float64 at the final parameters, agrees; a run stopped one check earlier is above it."""
    tol = 3e-3
    args = ["train.progress=false", "model=fc", "model.depth=2", "model.width=4", "model.beta=0", "data=teacher",
            "data.n_train=20", "data.n_test=0", "data.widths=[3,2]", "train.lam=0.05", "train=gd",
            "train.phases.0.lr=0.05", "train.phases.0.steps=20000", "train.check_every=10"]

    def run(name, *extra):
        cfg = compose_config([*args, *extra])
        return train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / name)

    s = run("tol", f"train.grad_tol={tol}")
    assert s["stop_reason"] == "grad_tol" and 0 < s["steps"] < 20000
    assert s["critical.grad_norm_rel"] <= tol * (1 + 1e-9)
    before = run("before", f"train.phases.0.steps={s['steps'] - 10}")
    assert before["critical.grad_norm_rel"] > tol


@pytest.mark.parametrize("extra", [("train.phases.0.steps=9",), ("train.phases.0.steps=30", "train.check_every=1000")])
def test_a_run_that_diverges_between_checks_is_failed_not_finished(tmp_path, extra):
    """The divergence and non-finite rules see the state every phase ends in, whatever check_every is."""
    cfg = compose_config(["train.progress=false", "train=gd", "train.phases.0.lr=1e8", *extra])
    with pytest.raises(RepcostError, match="run failed"):
        train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / "r")
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["status"] == "failed" and s["stop_reason"] in ("diverged", "non_finite")
    assert "end of phase" in s["message"] and not (tmp_path / "r" / "FINISHED").exists()
    assert (tmp_path / "r" / "error.txt").exists()
