"""train.ensemble_size=K: K seeds as one stacked model; member i == the single run with seed+i."""

from __future__ import annotations

import json
import math

import pytest
import torch
from omegaconf import OmegaConf
from torch.func import vmap

from repcost.config import compose_config, validate
from repcost.data import load_data
from repcost.errors import RepcostError
from repcost.models import build_model
from repcost.train.engine import Engine
from repcost.train.terms import _ShareMatmuls
from helpers import StopAfter, assert_member_matches_single, close, load, slow_but, train_direct


FC = ("model=fc", "model.width=8", "model.beta=1.0", "data=teacher", "data.n_train=40", "data.n_test=20")
LR = ("model=linear_relu", "model.depth=3", "model.width=12", "data=points_1d", "data.n_points=12")
OPT = {
    "gd": ("train=gd", "train.phases.0.lr=0.02"),
    "adam": ("train=adam", "train.phases.0.lr=0.01"),
    "sgd": ("train=sgd", "train.phases.0.batch_size=5", "train.phases.0.lr=0.01"),
    "adam_gd": ("train=adam_gd", "train.phases.0.steps=30", "train.phases.1.steps=30"),
    "adam_gd_lam_factor": ("train=adam_gd", "train.phases.0.steps=30", "train.phases.1.steps=30",
                           "+train.phases.0.lam_factor=20"),
    "adam_gd_rebalance": ("train=adam_gd", "train.phases.0.steps=30", "train.phases.1.steps=30",
                          "+train.phases.1.rebalance=true"),
}


@pytest.mark.parametrize("model", ["fc", "linear_relu"])
@pytest.mark.parametrize("opt", slow_but(list(OPT), ("adam_gd", "sgd")))
def test_members_match_single_runs(tmp_path, model, opt):
    args = (*(FC if model == "fc" else LR), *OPT[opt], "train.log_every=20", "seed=3")
    if not opt.startswith("adam_gd"):
        args += ("train.phases.0.steps=50",)
    top, ens = train_direct(tmp_path, *args, "train.ensemble_size=2", name="ens")
    members = []
    for i in range(2):
        single, sdir = train_direct(tmp_path, *args, f"seed={3 + i}", name=f"single{i}")
        members.append(assert_member_matches_single(ens, i, single, sdir))
    # best of K: the member with the lowest final objective, its summary plus the ensemble keys
    objs = [m["objective"] for m in members]
    assert top["best_member"] == objs.index(min(objs)) and top["objective"] == min(objs)
    assert top["member_objectives"] == objs and top["member_seeds"] == [3, 4]
    assert (top["members_agreeing"] == 2) == (max(objs) <= 1.01 * min(objs)) and top["members_agreeing"] >= 1
    assert top["ensemble_size"] == 2 and top["status"] == "finished" and top["seed"] == 3 + top["best_member"]
    assert top["failed_members"] == [] and top["member_status"] == ["finished"] * 2
    assert json.loads((ens / "summary.json").read_text()) == json.loads(json.dumps(top))
    assert (ens / "FINISHED").exists()
    # metrics.jsonl: the single-run lines, tagged with member and seed
    lines = [json.loads(x) for x in (ens / "metrics.jsonl").read_text().splitlines()]
    single_lines = [json.loads(x) for x in (tmp_path / "single1" / "metrics.jsonl").read_text().splitlines()]
    mine = [ln for ln in lines if ln["member"] == 1]
    assert [ln["step"] for ln in mine] == [ln["step"] for ln in single_lines]
    assert all(ln["seed"] == 4 for ln in mine)
    for a, b in zip(mine, single_lines):
        assert close(a["objective"], b["objective"], 1e-9) and a["phase"] == b["phase"] and a.get("lr") == b.get("lr")


def test_cross_entropy_minibatch_members_match(tmp_path):
    args = ("model=fc", "model.width=8", "data=s_curves", "data.n_per_class=10", "data.n_test_per_class=5",
            "train.loss=cross_entropy", "train=sgd", "train.phases.0.batch_size=8", "train.phases.0.steps=50",
            "train.phases.0.lr=0.05")
    top, ens = train_direct(tmp_path, *args, "train.ensemble_size=2", name="ens")
    for i in range(2):
        single, sdir = train_direct(tmp_path, *args, f"seed={i}", name=f"single{i}")
        assert_member_matches_single(ens, i, single, sdir)


def test_float32_members_match(tmp_path):
    args = (*FC, *OPT["adam"], "train.phases.0.steps=40", "dtype=float32")
    _, ens = train_direct(tmp_path, *args, "train.ensemble_size=2", name="ens")
    single, _ = train_direct(tmp_path, *args, "seed=1", name="single")
    m = json.loads((ens / "members" / "1" / "summary.json").read_text())
    assert m["dtype"] == "float32" and close(m["objective"], single["objective"], 1e-4)


@pytest.mark.slow  # several seconds of process starts and training
def test_stopping_rules_per_member(tmp_path):
    """target_loss stops each member at its own step, exactly where its single run stops."""
    args = (*FC, "train=adam", "train.phases.0.lr=0.01", "train.phases.0.steps=200", "train.target_loss=6.0")
    top, ens = train_direct(tmp_path, *args, "train.ensemble_size=3", name="ens")
    steps = []
    for i in range(3):
        single, sdir = train_direct(tmp_path, *args, f"seed={i}", name=f"single{i}")
        assert single["stop_reason"] == "target_loss"
        steps.append(assert_member_matches_single(ens, i, single, sdir)["steps"])
    assert len(set(steps)) == 3  # the members really stopped at different steps
    assert top["steps"] == steps[top["best_member"]]
    args = (*FC, "train=gd", "train.phases.0.lr=1e-12", "train.phases.0.steps=1000", "train.plateau_window=50")
    top, ens = train_direct(tmp_path, *args, "train.ensemble_size=2", name="plateau")
    assert top["stop_reason"] == "plateau" and top["steps"] < 1000


def test_all_members_diverge_raise_after_writing(tmp_path):
    args = (*FC, "train=gd", "train.phases.0.lr=1e6", "train.phases.0.steps=100")
    with pytest.raises(RepcostError, match="every ensemble member failed"):
        train_direct(tmp_path, *args, "train.ensemble_size=2", name="ens")
    ens = tmp_path / "ens"
    top = json.loads((ens / "summary.json").read_text())
    assert top["status"] == "failed" and top["failed_members"] == [0, 1] and not (ens / "FINISHED").exists()
    for i in range(2):
        with pytest.raises(RepcostError):
            train_direct(tmp_path, *args, f"seed={i}", name=f"single{i}")
        single = json.loads((tmp_path / f"single{i}" / "summary.json").read_text())
        m = assert_member_matches_single(ens, i, single, tmp_path / f"single{i}")
        assert m["stop_reason"] == "non_finite" and math.isfinite(m["param_sq_norm"])


def _setup(*overrides):
    spec = validate(compose_config(["train.progress=false", *FC, *overrides]))
    data = load_data(spec.data)
    return spec, data


def test_one_member_diverging_does_not_stop_the_others():
    """Member 1 starts 3x too large and blows up; members 0 and 2 train on and match their single runs."""
    spec, data = _setup("model.slope=0.5", "train=gd", "train.phases.0.lr=0.01", "train.phases.0.steps=60")

    def model(seed):
        m = build_model(spec.model, data.d_in, data.d_out, seed)
        if seed == 1:
            with torch.no_grad():
                for w in m.weights:
                    w.mul_(3.0)
        return m

    et = Engine([model(s) for s in range(3)], data, [spec.train] * 3, [0, 1, 2])
    results = et.run()
    assert [r.stop_reason for r in results] == ["budget", "non_finite", "budget"]
    assert all(torch.isfinite(p).all() for p in et.members[1].model.parameters())  # restored last finite state
    for i in (0, 1, 2):
        tr = Engine([model(i)], data, [spec.train], [i])
        r = tr.run()[0]
        assert r.stop_reason == results[i].stop_reason and r.steps == results[i].steps
        ev, ev_e = tr.members[0].evaluate(), et.members[i].evaluate()
        assert all(close(ev[k], ev_e[k]) for k in ev), (i, ev, ev_e)


def test_shared_matmul_is_one_gemm_and_exact():
    torch.manual_seed(0)
    x = torch.randn(30, 7, dtype=torch.float64)
    W = torch.randn(4, 5, 7, dtype=torch.float64, requires_grad=True)
    with _ShareMatmuls():
        out = vmap(lambda w: torch.relu(x @ w.T))(W)
    ref = torch.stack([torch.relu(x @ W[k].T) for k in range(4)])
    assert torch.allclose(out, ref, rtol=1e-13, atol=0)
    g = torch.randn_like(out)
    (ga,) = torch.autograd.grad((out * g).sum(), W)
    (gb,) = torch.autograd.grad((ref * g).sum(), W)
    assert torch.allclose(ga, gb, rtol=1e-13, atol=1e-14)
    with torch.profiler.profile() as prof:
        with _ShareMatmuls():
            out = vmap(lambda w: x @ w.T)(W)
        out.sum().backward()
    names = [e.name for e in prof.events()]
    assert "aten::bmm" not in names and names.count("aten::mm") == 2  # forward and weight gradient
    # a per-member input and a per-member weight (minibatch phases) still work
    xs = torch.randn(4, 30, 7, dtype=torch.float64)
    with _ShareMatmuls():
        out = vmap(lambda xx, w: xx @ w.T)(xs, W)
    assert torch.allclose(out, torch.einsum("knd,kmd->knm", xs, W), rtol=1e-13)


def test_ensemble_size_one_is_the_single_run(tmp_path):
    args = (*FC, *OPT["adam"], "train.phases.0.steps=30")
    a, da = train_direct(tmp_path, *args, name="a")
    b, db = train_direct(tmp_path, *args, "train.ensemble_size=1", name="b")
    strip = lambda s: {k: v for k, v in s.items() if not k.endswith("time_s")}  # noqa: E731
    assert strip(a) == strip(b) and "ensemble_size" not in b
    assert not (db / "members").exists()


def test_preempted_ensemble_resumes_exactly(tmp_path):
    args = (*FC, *OPT["sgd"], "train.phases.0.steps=60", "train.target_loss=3.0", "train.ensemble_size=3")
    ref, ref_dir = train_direct(tmp_path, *args, name="ref")
    part, d = train_direct(tmp_path, *args, name="run", stop_flag=StopAfter(25))
    assert part["status"] == "preempted" and part["steps"] == 25
    assert not (d / "FINISHED").exists() and not (d / "checkpoint.pt").exists()  # an ensemble's state is its members'
    assert all(load(d / "members" / str(i) / "checkpoint.pt")["status"] == "preempted" for i in range(3))
    done, d = train_direct(tmp_path, *args, name="run")
    strip = lambda s: {k: v for k, v in s.items() if not k.endswith("time_s")}  # noqa: E731
    assert strip(done) == strip(ref)
    for i in range(3):
        a = json.loads((ref_dir / "members" / str(i) / "summary.json").read_text())
        b = json.loads((d / "members" / str(i) / "summary.json").read_text())
        assert strip(a) == strip(b)
    assert (d / "metrics.jsonl").read_text().count("\n") == (ref_dir / "metrics.jsonl").read_text().count("\n")


def test_member_checkpoint_loads_like_a_single_run(tmp_path):
    from repcost.cli.analyze import analyze

    args = (*FC, *OPT["gd"], "train.phases.0.steps=20", "train.ensemble_size=2")
    top, d = train_direct(tmp_path, *args, name="ens")
    ck = load(d / "members" / "1" / "checkpoint.pt")
    spec = validate(OmegaConf.create(ck["config"]))
    assert spec.seed == 1 and spec.train.ensemble_size == 1
    data = load_data(spec.data)
    m = build_model(spec.model, data.d_in, data.d_out, 0)
    m.load_state_dict(ck["trainer"]["model"])
    # the top-level checkpoint is the best member's, in the single-run format
    best = load(d / "checkpoint.pt")
    assert best["best_member"] == top["best_member"] and "trainer" in best and "ensemble" not in best
    ref = load(d / "members" / str(top["best_member"]) / "checkpoint.pt")
    assert all(torch.equal(best["trainer"]["model"][k], v) for k, v in ref["trainer"]["model"].items())
    # a member's identity is its single run's: that run, launched on the member's directory, is already finished
    assert train_direct(tmp_path, *args[:-1], "seed=1", name="ens/members/1")[0]["reused"]
    scalars, _ = analyze(d / "members" / "1", ["analysis=spectra"])
    assert scalars and len(list((d / "members" / "1" / "reanalysis").glob("*/analysis/summary.json"))) == 1
