"""Certified stopping (`train.certify`, repcost.train.certify): a run escalates after its schedule until the 1-D
duality gap certifies it, stops as soon as it does, says so in one line, and says plainly when it cannot."""

from __future__ import annotations

import json
import pytest

import math
from helpers import StopAfter, train_direct


# a small net and data; one escalation round: insertion, a rebalance, Adam at 3·λ then at λ
SMALL = ("train=certified", "model.width=20", "data.n_points=6", "train.phases.0.steps=300", "train.phases.1.steps=100",
         "train.certify.gap_tol=0.05", "train.log_every=50",
         "train.certify.phases=[{optimizer: adam, lr: 3e-3, steps: 150, insert_units: 4, rebalance: true, lam_factor: 3.0},"
         "{optimizer: adam, lr: 1e-3, steps: 150, insert_units: 4, rebalance: true}]")


def _summary(d):
    return json.loads((d / "summary.json").read_text())


@pytest.mark.slow
def test_escalation_stops_as_soon_as_the_gap_certifies_and_a_smaller_budget_says_it_did_not(tmp_path, run_cli):
    d = tmp_path / "a"
    p = run_cli("repcost-train", *SMALL, "train.certify.rounds=4", f"hydra.run.dir={d}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    a = _summary(d)
    r = a["certify.rounds"]
    assert a["certified"] and a["stop_reason"] == "certified" and 1 <= r < 4
    # the gap it stopped on is the final certificate's, recomputed from the saved run, and within the tolerance
    assert a["certify.gap_rel"] == a["certify.duality_gap_rel"] <= 0.05 and a["certify.dual_value"] <= a["objective"]
    assert a["steps"] == 400 + sum(300 * 2 ** k for k in range(r)) < a["certify.budget_steps"]
    assert "certified within" in p.stderr + p.stdout
    # the same run with one round fewer: the same steps up to there, then "not certified" after its budget
    b_dir = tmp_path / "b"
    p = run_cli("repcost-train", *SMALL, f"train.certify.rounds={r - 1}", f"hydra.run.dir={b_dir}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    b = _summary(b_dir)
    assert not b["certified"] and b["stop_reason"] == "budget" and b["certify.gap_rel"] > 0.05
    assert b["steps"] == b["certify.budget_steps"] < a["steps"]
    assert "not certified: gap" in p.stderr + p.stdout and "after the budget" in p.stderr + p.stdout
    lines = {ln["step"]: ln for ln in map(json.loads, (d / "metrics.jsonl").read_text().splitlines()) if "lr" in ln}
    for ln in map(json.loads, (b_dir / "metrics.jsonl").read_text().splitlines()):
        if "lr" in ln:
            assert ln["objective"] == lines[ln["step"]]["objective"]


@pytest.mark.slow  # several seconds of process starts and training
def test_without_a_duality_gap_nothing_escalates_and_the_run_says_its_certificate_is_local(tmp_path, run_cli):
    d = tmp_path / "deep"
    p = run_cli("repcost-train", *SMALL, "model.depth=3", "train.certify.rounds=4", f"hydra.run.dir={d}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    s = _summary(d)
    assert not s["certified"] and s["steps"] == 400 and s["certify.rounds"] == 0 and "certify.duality_gap_rel" not in s
    assert "no global-minimum certificate exists for this model" in p.stderr + p.stdout


@pytest.mark.slow
def test_ensemble_members_stop_where_their_single_runs_do(tmp_path):
    args = (*SMALL, "train.certify.rounds=3", "seed=0")
    top, ens = train_direct(tmp_path, *args, "train.ensemble_size=3", name="ens")
    steps = []
    for i in range(3):
        single, _ = train_direct(tmp_path, *args, f"seed={i}", name=f"single{i}")
        m = _summary(ens / "members" / str(i))
        for k in ("steps", "stop_reason", "certified", "certify.rounds", "seed", "config_hash"):
            assert m[k] == single[k], (i, k)
        # stacked and single arithmetic agree to round-off over thousands of steps, insertions and rebalances
        for k in ("objective", "cost", "certify.gap_rel"):
            assert math.isclose(m[k], single[k], rel_tol=1e-6), (i, k, m[k], single[k])
        steps.append(m["steps"])
    assert len(set(steps)) > 1  # the members stopped in different rounds, each where its single run does
    assert top["steps"] == steps[top["best_member"]]


def test_a_bad_certify_setting_is_one_line(tmp_path, run_cli):
    p = run_cli("repcost-train", "train=certified", "train.certify.gap_tol=2", f"hydra.run.dir={tmp_path / 'x'}",
                cwd=tmp_path)
    assert p.returncode == 2 and "train.certify.gap_tol" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_a_run_preempted_inside_an_escalation_round_resumes_exactly(tmp_path):

    args = (*SMALL, "train.certify.rounds=4")
    ref, _ = train_direct(tmp_path, *args, name="ref")
    assert ref["certify.rounds"] >= 1
    part, _ = train_direct(tmp_path, *args, name="run", stop_flag=StopAfter(400 + 150 + 20))  # inside round 0's 2nd phase
    assert part["status"] == "preempted"
    done, _ = train_direct(tmp_path, *args, name="run")
    strip = lambda s: {k: v for k, v in s.items() if not k.endswith("time_s")}  # noqa: E731
    assert strip(done) == strip(ref)


@pytest.mark.slow  # an end-to-end CLI run of several seconds
def test_a_run_written_with_the_earlier_certificate_keys_is_reused_and_read_with_todays(tmp_path, run_cli):
    """A finished run whose files name the critical-point certificate `analysis.certificate` (balance tolerance
    `gap_tol`) and report it as `cert.*`: the same command and `--resume` find it already finished (no certificate
    key is part of the identity), and its readers see `critical.*`, `certify.*` and `analysis.critical`."""
    from omegaconf import OmegaConf

    from repcost.api import load_run
    from repcost.sweep import job_record

    args = ("model.width=8", "data.n_points=5", "train.phases.0.steps=20", "train.phases.1.steps=20",
            "analysis.critical.balance_tol=0.02", "analysis.critical.descent_evals=5")
    d = tmp_path / "run"
    p = run_cli("repcost-train", *args, f"hydra.run.dir={d}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    today = _summary(d)
    assert "critical.stationarity" in today and "certify.duality_gap_rel" in today and "critical.descent_rel" in today

    def old(key: str) -> str:
        return "cert." + key.split(".", 1)[1] if key.startswith(("critical.", "certify.dual")) else key

    earlier = {old(k): v for k, v in today.items()}
    if isinstance(today.get("not_applicable"), dict):
        earlier["not_applicable"] = {old(k): v for k, v in today["not_applicable"].items()}
    (d / "summary.json").write_text(json.dumps(earlier))
    cfg = OmegaConf.load(d / ".hydra" / "config.yaml")
    node = OmegaConf.to_container(cfg.analysis.critical)
    node["gap_tol"] = node.pop("balance_tol")
    cfg.analysis.certificate = node
    del cfg.analysis["critical"]
    OmegaConf.save(cfg, d / ".hydra" / "config.yaml")
    saved = [o.replace("analysis.critical.balance_tol", "analysis.certificate.gap_tol").replace("analysis.critical",
             "analysis.certificate") for o in OmegaConf.load(d / ".hydra" / "overrides.yaml")]
    OmegaConf.save(OmegaConf.create(saved), d / ".hydra" / "overrides.yaml")
    assert "analysis.certificate.gap_tol=0.02" in saved
    before = {f.name: f.read_bytes() for f in d.iterdir() if f.is_file() and f.suffix != ".log" and f.name != ".lock"}
    for how in (("--resume", str(d)), (*args, f"hydra.run.dir={d}")):
        p = run_cli("repcost-train", *how, cwd=tmp_path)
        assert p.returncode == 0 and "already finished" in p.stdout + p.stderr, p.stderr
    assert before == {f.name: f.read_bytes() for f in d.iterdir() if f.is_file() and f.suffix != ".log" and f.name != ".lock"}
    run = load_run(d)
    assert run.summary == today and job_record(d, d)["critical.stationarity"] == today["critical.stationarity"]
    assert run.config["analysis"]["critical"]["balance_tol"] == 0.02 and run.spec.analysis.critical.balance_tol == 0.02


def test_a_certified_run_the_critical_point_certificate_does_not_accept_says_why_in_its_line():
    """The gap bounds the objective; a point that close to the minimum's objective need not be a minimiser, and the
    one line a certified run ends on says so where the local certificate disagrees (and only there)."""
    from repcost.train.certify import describe

    s = {"certified": True, "certify.gap_rel": 3e-5, "certify.rounds": 1, "certify.steps": 5000,
         "critical_point": False, "critical.stationarity": 4.37, "critical.clarke_stationarity": 1.62}
    line = describe(s)
    assert line.startswith("certified within 0.003 %") and "not a critical point (stationarity 1.62)" in line
    assert "\n" not in line
    assert "not a critical point" not in describe({**s, "critical_point": True})
    assert "not a critical point (stationarity 4.37)" in describe({k: v for k, v in s.items()
                                                                 if k != "critical.clarke_stationarity"})
    unjudged = describe({**s, "critical.clarke_stationarity": math.nan, "critical.kinks": 350})
    assert "not a critical point" not in unjudged and "350 kinks is not computed: raise analysis.critical.max_kinks" in unjudged


def test_the_last_line_names_which_of_gap_and_cost_a_run_did_not_reach():
    """With `certify.cost_tol` the line judges C(θ)/C_min beside the gap and names the criterion missed; without it,
    nothing about the cost."""
    from repcost.train.certify import describe

    s = {"certified": True, "certify.gap_rel": 1e-9, "certify.rounds": 1, "certify.steps": 3000, "critical_point": True,
         "certify.cost_tol": 0.01, "certify.cost_over_min": 0.995}
    assert "C(θ) within 1 % of the min-norm interpolant's cost (C/C_min = 0.9950)" in describe(s)
    low = {**s, "certify.cost_over_min": 0.733}
    line = describe(low)
    assert line.startswith("certified within") and "NOT within 1 %" in line and "C/C_min = 0.7330" in line
    both = {**low, "certified": False, "certify.gap_rel": 0.05, "certify.gap_tol": 0.01, "stop_reason": "budget",
            "certify.max_rounds": 1, "certify.budget_steps": 3000}
    line = describe(both)
    assert line.startswith("not certified: gap 5 %") and "NOT within 1 %" in line and "\n" not in line
    plain = {k: v for k, v in s.items() if not k.startswith("certify.cost")}
    assert "C_min" not in describe(plain)
    assert "C_min" not in describe({**s, "certify.cost_over_min": None})  # judged, but no C_min for this data


def test_the_cost_ratio_exists_only_where_c_min_does():
    """C(θ)/C_min: absent without cost_tol, None without a duality gap, for 2-D inputs and for constant labels
    (C_min = 0)."""
    import torch

    from repcost.config import compose_config, validate
    from repcost.train.certify import summary_fields

    on = validate(compose_config(["train=certified", "train.certify.cost_tol=0.01"])).train
    off = validate(compose_config(["train=certified"])).train
    x, y = torch.tensor([[0.0], [1.0], [2.0]]), torch.tensor([[0.0], [1.0], [0.0]])

    def ratio(cfg, gap, xx, yy):
        return summary_fields(cfg, "certified", gap, 0, 10, 4.0, xx, yy).get("certify.cost_over_min", "absent")

    assert ratio(on, 1e-9, x, y) == 4.0 / 2.0  # the hat's minimal cost: slopes +1 then −1, Σ|Δslope| = 2
    assert ratio(off, 1e-9, x, y) == "absent" and ratio(on, None, x, y) is None
    assert ratio(on, 1e-9, torch.ones(3, 2), y) is None
    assert ratio(on, 1e-9, x, torch.ones(3, 1)) is None


@pytest.mark.slow  # an end-to-end CLI run of several seconds
def test_the_cost_ratio_is_the_runs_cost_over_the_spline_minimum_of_its_data(tmp_path, run_cli):
    """End to end: `certify.cost_over_min` is C(θ) over Savarese et al. 2019 Thm 3.3's minimum recomputed from the
    saved run's data (an independent path), and a deeper net (no duality gap, not Savarese's setting) has none."""
    from repcost.analysis import spline_min_cost
    from repcost.api import load_run

    fast = ("train=certified", "model.width=20", "data.n_points=6", "train.phases.0.steps=100",
            "train.phases.1.steps=50", "train.certify.cost_tol=0.05")
    d = tmp_path / "a"
    p = run_cli("repcost-train", *fast, f"hydra.run.dir={d}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    s = _summary(d)
    data = load_run(d).data()
    cmin = spline_min_cost(data.x_train.double().numpy()[:, 0], data.y_train.double().numpy()[:, 0])
    assert s["certify.cost_tol"] == 0.05 and math.isclose(s["certify.cost_over_min"], s["cost"] / cmin, rel_tol=1e-12)
    assert "of the min-norm interpolant's cost (C/C_min = " in p.stderr + p.stdout
    deep = tmp_path / "deep"
    p = run_cli("repcost-train", *fast, "model.depth=3", f"hydra.run.dir={deep}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert _summary(deep)["certify.cost_over_min"] is None and "C_min" not in p.stderr + p.stdout
