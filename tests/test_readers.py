"""One value parser, one sweep reader, one checkpoint loader: their rule, their round trips, every checkpoint layout.

The sweeps here are hand-made job directories (no training); the checkpoint tests train one tiny ensemble.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

import repcost
from repcost.errors import RepcostError
from repcost.sweep import collect, parse_value

FIXTURE = Path(__file__).parent / "fixtures" / "legacy_run"


# -- the value parser ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text,value", [
    ("", None), ("null", None), ("NULL", None), ("Null", None),
    ("true", True), ("True", True), ("TRUE", True), ("false", False), ("False", False),
    ("3", 3), ("-2", -2), ("0", 0), ("1_000", 1000),
    ("0.5", 0.5), ("1e-3", 1e-3), ("1.0", 1.0), ("-inf", -math.inf),
    ("[8,8]", "[8,8]"), ("[1, 2]", "[1, 2]"), ("{a:1}", "{a:1}"), ("adam", "adam"), ("yes", "yes"), ("1e-3x", "1e-3x"),
])
def test_parse_value_rule(text, value):
    got = parse_value(text)
    assert got == value and type(got) is type(value)  # 3 is an int, 1.0 a float, True a bool, "[8,8]" the text


def test_parse_value_nan_is_a_float():
    assert math.isnan(parse_value("nan")) and math.isnan(parse_value("NaN"))


# -- the sweep reader ---------------------------------------------------------------------------------
def _job(sweep: Path, name: str, overrides: list[str], summary: dict | None, finished: bool = True) -> Path:
    d = sweep / name
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    if summary is not None:
        (d / "summary.json").write_text(json.dumps(summary))
    if finished:
        (d / "FINISHED").write_text("x")
    return d


def _sweep(tmp_path: Path) -> Path:
    sweep = tmp_path / "sweep"
    s = {"objective": 0.1 + 0.2, "steps": 40, "status": "finished", "critical_point": True, "note": None,
         "cert": {"gap": 1e-17}, "device": "cpu"}
    _job(sweep, "model.width=8,seed=0", ["model.width=8", "seed=0", "train.lam=1e-3", "model.bias=True", "name=x"], s)
    _job(sweep, "model.width=16,seed=0", ["model.width=16", "seed=0", "train.lam=0.01", "model.bias=false",
                                          "model.widths=[8,8]"], {**s, "objective": 1 / 3, "critical_point": False})
    _job(sweep, "01", ["seed=1", "train.lam=null"], None, finished=False)  # a job dir whose name reads as a number
    return sweep


def test_sweep_reader_gives_back_what_collect_wrote(tmp_path):
    """runs.csv written by collect and read by load_sweep: the same Python values (floats exactly, booleans from
    either spelling of the override, None, lists as their text), and the figure reader's rows are the same rows."""
    from repcost.figures import finished_rows

    sweep = _sweep(tmp_path)
    rows, _, skipped = collect(sweep)
    assert not skipped
    read = repcost.load_sweep(sweep)
    cols = [k for k in read[0] if k != "path"]  # a cell a job lacks is empty in runs.csv, None when read
    assert [{k: r[k] for k in cols} for r in read] == [{k: None if r.get(k) == "" else r.get(k)
                                                         for k in cols} for r in rows]
    by_job = {r["job"]: r for r in read}
    assert by_job["model.width=8,seed=0"]["model.bias"] is True and by_job["model.width=16,seed=0"]["model.bias"] is False
    assert by_job["model.width=8,seed=0"]["train.lam"] == 1e-3 and by_job["model.width=8,seed=0"]["objective"] == 0.1 + 0.2
    assert by_job["model.width=16,seed=0"]["model.widths"] == "[8,8]" and by_job["01"]["train.lam"] is None
    assert by_job["01"]["path"] == sweep / "01" and by_job["01"]["path"].is_dir()  # the job column stays text
    assert [r["job"] for r in repcost.load_sweep(sweep, finished_only=True)] == sorted(
        ["model.width=16,seed=0", "model.width=8,seed=0"])
    with pytest.raises(RepcostError, match="1 job\\(s\\) of .* did not finish, e.g. 01"):
        finished_rows(sweep)
    shutil.rmtree(sweep / "01")
    collect(sweep)
    assert finished_rows(sweep) == repcost.load_sweep(sweep, finished_only=True)


# -- the checkpoint loader ----------------------------------------------------------------------------
def _digest(d: Path) -> dict:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*")) if p.is_file()}


def _mse(model, data) -> float:
    with torch.no_grad():
        return ((model(data.x_train) - data.y_train) ** 2).sum(1).mean().item()


def test_legacy_run_loads_through_the_one_loader():
    """tests/fixtures/legacy_run (an older format) loads; the net reproduces its own summary's train loss; the figure
    loader gives the same weights; the fixture is left byte for byte as it was."""
    from repcost.figures import LoadedRun

    before = _digest(FIXTURE)
    run = repcost.load_run(FIXTURE)
    model = run.model()
    saved = torch.load(FIXTURE / "checkpoint.pt", weights_only=True)["trainer"]["model"]
    assert all(torch.equal(model.state_dict()[k], v) for k, v in saved.items())
    assert math.isclose(_mse(model, run.data()), run.summary["train_loss"], rel_tol=1e-9)
    fig = LoadedRun(FIXTURE)
    assert all(torch.equal(fig.model.state_dict()[k], v) for k, v in model.state_dict().items())
    assert fig.summary == run.summary and run.model("float32").a.dtype == torch.float32
    assert _digest(FIXTURE) == before


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory) -> tuple[Path, Path]:
    """A 2-member ensemble run in the layout with a top-level checkpoint (old) and a copy without one (members only)."""
    from repcost.config import compose_config, validate
    from repcost.train.run import train_run

    root = tmp_path_factory.mktemp("ens")
    cfg = compose_config(["train.progress=false", "model=fc", "model.width=5", "data=teacher", "data.n_train=20",
                          "data.n_test=10", "train=adam", "train.phases.0.steps=15", "train.ensemble_size=2"])
    old = root / "old"
    train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), old)
    (old / ".hydra").mkdir(exist_ok=True)  # (train_run writes .hydra/ itself; the saved config is the composed one)
    OmegaConf.save(cfg, old / ".hydra" / "config.yaml")
    new = root / "new"
    shutil.copytree(old, new)
    (new / "checkpoint.pt").unlink()
    return old, new


def test_members_only_ensemble_loads_its_best_member(ensemble):
    old, new = ensemble
    best = json.loads((new / "summary.json").read_text())["best_member"]
    member = torch.load(new / "members" / str(best) / "checkpoint.pt", weights_only=True)["trainer"]["model"]
    m_old, m_new = repcost.load_run(old).model(), repcost.load_run(new).model()
    for k, v in member.items():
        assert torch.equal(m_new.state_dict()[k], v) and torch.equal(m_old.state_dict()[k], v)
    assert repcost.api.checkpoint_file(new) == new / "members" / str(best) / "checkpoint.pt"


def test_members_only_ensemble_without_best_member_is_one_line(ensemble, tmp_path):
    d = tmp_path / "ens"
    shutil.copytree(ensemble[1], d)
    s = json.loads((d / "summary.json").read_text())
    del s["best_member"]
    (d / "summary.json").write_text(json.dumps(s))
    with pytest.raises(RepcostError, match="names no best_member"):
        repcost.load_run(d).model()


def test_analyze_reads_both_ensemble_layouts_alike(ensemble, tmp_path):
    from repcost.cli.analyze import analyze

    old, new = ensemble
    a = analyze(old, ["analysis=spectra"], tmp_path / "a")[0]
    b = analyze(new, ["analysis=spectra"], tmp_path / "b")[0]
    assert a == b and a["weights.W1.rank"] >= 1


def test_train_log_and_a_reanalysis_say_what_made_them(tmp_path):
    from repcost.cli import analyze as analyze_cli
    from helpers import QUICK, in_process, train

    d = tmp_path / "run"
    code, out, err = train([*QUICK, "train.lam=1e-3", f"hydra.run.dir={d}"], tmp_path)
    assert code == 0, err
    summary = json.loads((d / "summary.json").read_text())
    head = (d / "train.log").read_text().splitlines()[:3]
    assert "repcost-train" in head[0] and "train.lam=1e-3" in head[0] and f"hydra.run.dir={d}" in head[0]
    for key in ("repcost_version", "git_commit", "config_hash"):
        assert f"{key} {summary[key]}" in " ".join(head).replace("=", " ").replace(":", " "), (key, head)
    assert summary["config_hash"] not in out  # the console carries the run's report only
    code, out, err = in_process(analyze_cli.main, "repcost-analyze", [str(d), "analysis=spectra"], tmp_path)
    assert code == 0, err
    (target,) = (d / "reanalysis").iterdir()
    s = json.loads((target / "analysis" / "summary.json").read_text())
    assert s["overrides"] == ["analysis=spectra"] and s["run_config_hash"] == summary["config_hash"]
    for key in ("repcost_version", "git_commit", "python_version", "torch_version"):
        assert s[key] == summary[key]
    assert s["config"]["analysis"]["name"] == "spectra" and s["config"]["train"]["lam"] == 1e-3
    assert s["config"]["model"] == OmegaConf.to_container(OmegaConf.load(d / ".hydra" / "config.yaml"))["model"]
