"""The training loop: objective decreases, seeds, phases, stopping rules, NaN handling."""

from __future__ import annotations

import json
import math

import pytest
from omegaconf import OmegaConf

from repcost.config import compose_config, validate
from repcost.errors import RepcostError
from repcost.train.run import train_run


def train(tmp_path, *overrides, name="run"):
    cfg = compose_config(["train.progress=false", *overrides])
    spec = validate(cfg)
    d = OmegaConf.to_container(cfg, resolve=True)
    return train_run(spec, d, tmp_path / name), tmp_path / name


def first_objective(run_dir):
    return json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])["objective"]


DATASET_CASES = [
    ("data=points_1d", "model=linear_relu"),
    ("data=two_rays", "model=linear_relu", "model.depth=3"),
    ("data=teacher", "model=fc", "model.width=16", "data.n_train=100", "data.n_test=50"),
    ("data=rank_k", "model=fc", "model.depth=4", "model.width=16", "data.n_train=100", "data.n_test=50"),
    ("data=bipartite", "model=fc", "model.depth=2", "model.width=12", "model.beta=0"),
    ("data=points_1d", "model=parallel"),
]


@pytest.mark.parametrize("case", DATASET_CASES, ids=lambda c: c[0] + "-" + c[1])
def test_training_reduces_objective(tmp_path, case):
    s, d = train(tmp_path, *case, "train=adam", "train.phases.0.steps=200", "train.log_every=50")
    assert s["status"] == "finished" and s["steps"] == 200
    assert s["objective"] < first_objective(d)
    for key in ("train_loss", "objective", "param_sq_norm", "param_sq_norm_per_depth", "cost", "steps",
                "stop_reason", "wall_time_s", "device", "dtype", "seed", "git_commit", "config_hash"):
        assert key in s
    assert math.isclose(s["param_sq_norm_per_depth"], s["param_sq_norm"] / s["depth"])


def _strip(s):
    return {k: v for k, v in s.items() if k not in ("wall_time_s",)}


def test_same_seed_same_summary_and_seeds_differ(tmp_path):
    args = ("train=sgd", "train.phases.0.steps=60", "train.phases.0.batch_size=4", "model.width=10")
    a, _ = train(tmp_path, *args, "seed=0", name="a")
    b, _ = train(tmp_path, *args, "seed=0", name="b")
    c, _ = train(tmp_path, *args, "seed=1", name="c")
    assert _strip(a) == _strip(b)
    assert a["objective"] != c["objective"] and a["seed"] == 0 and c["seed"] == 1


def test_phases_run_in_sequence(tmp_path):
    s, d = train(tmp_path, "train=adam_gd", "train.phases.0.steps=30", "train.phases.1.steps=20", "train.log_every=10")
    lines = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    assert s["steps"] == 50
    assert [ln["phase"] for ln in lines] == [0, 0, 0, 1, 1, 1]  # the last line: the state after step 50
    assert lines[-2]["lr"] == pytest.approx(1e-2) and lines[-1]["step"] == 50 and "lr" not in lines[-1]


def test_lam_factor_trains_its_phase_on_a_scaled_lambda(tmp_path):
    """A phase with lam_factor f takes the steps of λ·f (same parameters bit for bit); summaries report λ."""
    import torch
    gd = ("model.width=10", "train.log_every=10", "train.reg_scale=one")
    scaled, sd = train(tmp_path, *gd, "train.lam=5e-3", "train.phases=[{optimizer:gd,lr:0.02,steps:40}]",
                       name="scaled")
    cont, cd = train(tmp_path, *gd, "train.lam=1e-3", "train.phases=[{optimizer:gd,lr:0.02,steps:40,lam_factor:5},"
                     "{optimizer:gd,lr:0.02,steps:0}]", name="cont")
    a = torch.load(sd / "checkpoint.pt", weights_only=True)["trainer"]["model"]
    b = torch.load(cd / "checkpoint.pt", weights_only=True)["trainer"]["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert cont["param_sq_norm"] == scaled["param_sq_norm"] and cont["train_loss"] == scaled["train_loss"]
    assert cont["objective"] == pytest.approx(cont["train_loss"] + 1e-3 * cont["param_sq_norm"], rel=1e-12)
    logged = [json.loads(x) for x in (cd / "metrics.jsonl").read_text().splitlines()]
    assert all(r["objective"] == pytest.approx(r["train_loss"] + 1e-3 * r["param_sq_norm"], rel=1e-12)
               for r in logged)


def test_last_phase_must_train_the_stated_lambda():
    with pytest.raises(RepcostError, match=r"phases\[-1\].lam_factor=3.0.*last phase"):
        validate(compose_config(["train=adam_gd", "+train.phases.1.lam_factor=3"]))
    with pytest.raises(RepcostError, match=r"lam_factor=0.0.*> 0"):
        validate(compose_config(["train=adam_gd", "+train.phases.0.lam_factor=0"]))


def test_target_loss_stops_mid_run(tmp_path):
    """A target between the first and the reachable loss stops the run at the first check below it."""
    ref, d = train(tmp_path, "train=adam", "train.phases.0.steps=400", "train.log_every=10", name="ref")
    losses = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    target = (losses[0]["train_loss"] * ref["train_loss"]) ** 0.5  # geometric mid-point of the way down
    first_below = next(r["step"] for r in losses if r["train_loss"] <= target)
    s, _ = train(tmp_path, "train=adam", "train.phases.0.steps=400", "train.log_every=10",
                 f"train.target_loss={target}", name="stop")
    assert s["stop_reason"] == "target_loss" and 0 < s["steps"] == first_below < 400
    assert s["train_loss"] <= target


def test_plateau_stops(tmp_path):
    s, _ = train(tmp_path, "train=gd", "train.phases.0.lr=1e-12", "train.phases.0.steps=5000",
                 "train.plateau_window=100", "train.plateau_rel_tol=1e-6")
    assert s["stop_reason"] == "plateau" and s["steps"] <= 200


def test_nan_stops_with_message_and_keeps_last_good_state(tmp_path):
    with pytest.raises(RepcostError, match="non_finite|became"):
        train(tmp_path, "model=fc", "data=teacher", "data.n_train=50", "data.n_test=0",
              "train=gd", "train.phases.0.lr=1e6", "train.phases.0.steps=200")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stop_reason"] == "non_finite" and summary["status"] == "failed"
    assert math.isfinite(summary["param_sq_norm"])  # evaluated at the restored finite state
    import torch
    ck = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert all(torch.isfinite(t).all() for t in ck["trainer"]["model"].values())


def test_float32_runs(tmp_path):
    s, _ = train(tmp_path, "dtype=float32", "train=adam", "train.phases.0.steps=50")
    assert s["dtype"] == "float32" and math.isfinite(s["objective"])


def test_cross_entropy_needs_classification(tmp_path):
    with pytest.raises(RepcostError, match="classification"):
        train(tmp_path, "train.loss=cross_entropy", "train.phases.0.steps=1")
