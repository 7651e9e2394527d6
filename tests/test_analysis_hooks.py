"""Analyses wired into training (analysis/ group) and recomputed by repcost-analyze from a checkpoint."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from omegaconf import OmegaConf

from repcost.config import compose_config, validate
from repcost.errors import RepcostError
from repcost.train.run import train_run


def train(run_dir, *overrides):
    cfg = compose_config(["train.progress=false", *overrides])
    return train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), run_dir)


def _hydra_dir(run_dir, *overrides):
    """Save the composed config as Hydra does, so repcost-analyze can read the run."""
    cfg = compose_config(["train.progress=false", *overrides])
    (run_dir / ".hydra").mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")


ARGS = ("model=fc", "model.depth=4", "model.width=12", "data=rank_k", "data.n_train=80", "data.n_test=20",
        "data.d_in=6", "data.d_out=6", "data.k=2", "train=adam", "train.phases.0.steps=300")


def test_periodic_and_final_analyses(tmp_path):
    d = tmp_path / "run"
    s = train(d, *ARGS, "analysis=spectra", "analysis.every=100", "train.log_every=100")
    lines = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    periodic = [ln for ln in lines if "hidden.min_rank" in ln]
    assert [ln["step"] for ln in periodic] == [100, 200]
    for key in ("hidden.post1.rank", "hidden.post3.rank", "jacobian.rank_max", "jacobian.schatten_cost_max",
                "jacobian.prop3_bound", "balance.layer_gap_max", "weights.W1.rank"):
        assert key in s, key
    assert s["jacobian.schatten_cost_max"] <= s["jacobian.prop3_bound"] + 1e-9  # Jacot 2023 Prop 3
    z = np.load(d / "analysis" / "hidden.npz")
    assert set(z.files) == {"s_post1", "s_post2", "s_post3"} and z["s_post1"].shape == (12,)
    assert np.load(d / "analysis" / "jacobian.npz")["jacobian_s"].shape == (10, 6)
    rows = list(csv.DictReader(open(d / "analysis" / "layers.csv")))
    assert {r["analysis"] for r in rows} == {"hidden", "weights", "balance", "jacobian"}
    jac = [r for r in rows if r["analysis"] == "jacobian"]  # one row per point, its ranks those of jacobian.npz
    s = np.load(d / "analysis" / "jacobian.npz")["jacobian_s"]
    assert len(jac) == 10 and [float(r["s1"]) for r in jac] == pytest.approx(list(s[:, 0]), rel=1e-12)
    summary = json.loads((d / "summary.json").read_text())
    assert max(int(r["numerical_rank"]) for r in jac) == summary["jacobian.numerical_rank_max"] == summary["jacobian.rank_max"]


@pytest.mark.slow
def test_analyze_cli_reproduces_final_analysis(tmp_path, run_cli):
    d = tmp_path / "run"
    _hydra_dir(d, *ARGS, "analysis=spectra")
    s = train(d, *ARGS, "analysis=spectra")
    p = run_cli("repcost-analyze", str(d), "analysis=spectra", "--out", str(tmp_path / "re"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    again = json.loads((tmp_path / "re" / "analysis" / "summary.json").read_text())
    from repcost.provenance import provenance

    record = {"overrides", "run_dir", "run_config_hash", "config", *provenance()}  # what made the reanalysis
    assert record <= set(again) and again["run_config_hash"] == s["config_hash"]
    scalars = set(again) - record
    assert any(k.startswith("jacobian.") for k in scalars)
    for k in scalars:
        assert again[k] == pytest.approx(s[k], rel=1e-9, abs=1e-12), k
    # on fresh points drawn from the same dataset (another data seed): still runs, other numbers
    p = run_cli("repcost-analyze", str(d), "analysis=spectra", "data.seed=5", "--out", str(tmp_path / "fresh"),
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    fresh = json.loads((tmp_path / "fresh" / "analysis" / "summary.json").read_text())
    assert fresh["jacobian.prop3_bound"] == pytest.approx(s["jacobian.prop3_bound"])  # same weights
    assert fresh["jacobian.schatten_cost_max"] != s["jacobian.schatten_cost_max"]  # other points


@pytest.mark.slow
@pytest.mark.parametrize("case,match", [("notrun", "not a repcost run"), ("othermodel", "holds a"),
                                        ("costs_on_fc", "does not apply"), ("unknown", "allowed")])
def test_analyze_bad_input_one_line_exit_2(tmp_path, run_cli, case, match):
    d = tmp_path / "run"
    _hydra_dir(d, *ARGS)
    train(d, *ARGS)
    args = {"notrun": [str(tmp_path)], "othermodel": [str(d), "model=linear_relu"],
            "costs_on_fc": [str(d), "analysis=costs", "analysis.analyses=[costs]"], "unknown": [str(d), "analysis=nope"]}[case]
    p = run_cli("repcost-analyze", *args, cwd=tmp_path)
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and match in lines[0], p.stderr


def test_analysis_full_runs_what_applies_and_says_why_not_the_rest(tmp_path):
    s = train(tmp_path / "r", "model=fc", "model.width=8", "data=teacher", "data.n_train=40", "data.n_test=10",
              "train.phases.0.steps=30", "train.phases.1.steps=0", "analysis=full")
    assert "registered representation costs" in s["not_applicable"]["costs"]
    assert not {k for k in s if k.startswith("costs.")}
    assert {"hidden.min_rank", "weights.W1.rank", "jacobian.prop3_bound", "balance.layer_gap_max"} <= set(s)
    assert s["jacobian.schatten_cost_max"] <= s["jacobian.prop3_bound"] + 1e-9  # Jacot 2023 Prop 3 on a chain


def test_costs_analysis_on_savarese_net(tmp_path):
    s = train(tmp_path / "r", "model=linear_relu", "model.width=30", "train=adam", "train.phases.0.steps=300",
              "analysis=costs")
    # Φ_2 of the 2-layer representation is its path norm (Ongie eq. 13), R̄ ≥ ... and cost C_2 ≥ Φ_2
    assert s["costs.phi_L"] == pytest.approx(s["costs.path_norm"], rel=1e-9)
    assert s["cost"] >= s["costs.phi_L"] - 1e-9
    assert s["costs.rbar"] > 0 and s["costs.spline_min_cost"] > 0


def test_unknown_analysis_in_run_is_an_error(tmp_path):
    with pytest.raises(RepcostError, match="allowed"):
        train(tmp_path / "r", "analysis=spectra", "analysis.analyses=[hidden,bogus]", "train.phases.0.steps=2")
