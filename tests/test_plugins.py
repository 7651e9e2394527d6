"""User extensions without editing repcost: a user's config dir and a plugin package with its own dataset."""

from __future__ import annotations

import json
import re
import pytest
from pathlib import Path

import torch
from omegaconf import OmegaConf
from helpers import REPO, TINY, user_setup



def _check_ring_run(run: Path) -> None:
    cfg = OmegaConf.load(run / ".hydra" / "config.yaml")
    assert cfg.data.name == "ring" and cfg.data.n_points == 12 and cfg.model.depth == 3
    assert json.loads((run / "summary.json").read_text())["steps"] == 15
    state = torch.load(run / "checkpoint.pt", weights_only=True)["trainer"]["model"]
    first = next(v for v in state.values() if v.ndim == 2)
    assert first.shape[-1] == 2  # the net was built for the plugin's 2-D inputs


def _train_ring_study(tmp_path, run_cli, conf, pkgs) -> None:
    run = tmp_path / "run"
    p = run_cli("repcost-train", "--config-dir", str(conf), "experiment=ring-study", *TINY, f"hydra.run.dir={run}",
                cwd=tmp_path, env={"PYTHONPATH": str(pkgs)})
    assert p.returncode == 0, p.stderr
    _check_ring_run(run)


@pytest.mark.slow  # several seconds of process starts and training
def test_user_config_dir_preset_and_plugin_dataset_from_config_key(tmp_path, run_cli):
    conf, pkgs = user_setup(tmp_path, preset_plugins=True)
    _train_ring_study(tmp_path, run_cli, conf, pkgs)


@pytest.mark.slow  # several seconds of process starts and training
def test_plugin_from_entry_point(tmp_path, run_cli):
    conf, pkgs = user_setup(tmp_path, preset_plugins=False)
    dist = pkgs / "ringdata-0.1.dist-info"  # what `pip install` of the user's package leaves on sys.path
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ringdata\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[repcost.plugins]\nring = ringdata\n")
    _train_ring_study(tmp_path, run_cli, conf, pkgs)


@pytest.mark.slow  # several seconds of process starts and training
def test_user_preset_of_builtin_parts_on_the_hydra_searchpath(tmp_path, run_cli):
    conf = tmp_path / "myconf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "wide.yaml").write_text("# @package _global_\nmodel:\n  width: 7\n")
    run = tmp_path / "run"
    p = run_cli("repcost-train", f"hydra.searchpath=[file://{conf}]", "experiment=wide", *TINY,
                f"hydra.run.dir={run}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert OmegaConf.load(run / ".hydra" / "config.yaml").model.width == 7


def test_missing_plugin_is_one_line_and_exit_2(tmp_path, run_cli):
    p = run_cli("repcost-train", "plugins=[no_such_plugin_pkg]", *TINY, f"hydra.run.dir={tmp_path / 'r'}",
                cwd=tmp_path)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no_such_plugin_pkg" in lines[0] and "Traceback" not in p.stderr


def test_readme_plugin_example(tmp_path, run_cli):
    text = (REPO / "README.md").read_text()
    code = re.search(r"```python\n# \S*mypkg/repcost_plugin.py\n(.*?)```", text, re.DOTALL).group(1)
    pkg = tmp_path / "pkgs" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "repcost_plugin.py").write_text(code)
    (tmp_path / "conf" / "data").mkdir(parents=True)
    (tmp_path / "conf" / "data" / "ring.yaml").write_text("name: ring\nn_points: 8\n")
    run = tmp_path / "run"
    p = run_cli("repcost-train", "--config-dir", str(tmp_path / "conf"), "data=ring", "plugins=[mypkg.repcost_plugin]",
                *TINY, f"hydra.run.dir={run}", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "pkgs")})
    assert p.returncode == 0, p.stderr
    assert OmegaConf.load(run / ".hydra" / "config.yaml").data.n_points == 8
    assert json.loads((run / "summary.json").read_text())["data"] == "ring"


@pytest.mark.slow
def test_analyze_reads_an_analysis_preset_from_a_user_config_dir(tmp_path, run_cli):
    conf = tmp_path / "conf"
    (conf / "analysis").mkdir(parents=True)
    (conf / "analysis" / "justweights.yaml").write_text("name: justweights\nanalyses: [weights]\n")
    run = tmp_path / "run"
    assert run_cli("repcost-train", "model=fc", "model.width=4", *TINY, f"hydra.run.dir={run}", cwd=tmp_path).returncode == 0
    p = run_cli("repcost-analyze", str(run), "analysis=justweights", "--config-dir", str(conf), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    (out,) = run.glob("reanalysis/*/analysis")  # never the run's own analysis/
    assert sorted(f.stem for f in out.glob("*.npz")) == ["weights"]
    p = run_cli("repcost-analyze", str(run), "analysis=nope", "--config-dir", str(conf), cwd=tmp_path)
    assert p.returncode == 2 and "justweights" in p.stderr and "spectra" in p.stderr


def test_compose_config_with_a_user_config_dir(tmp_path, monkeypatch):
    import sys

    from repcost import registry
    from repcost.config import compose_config, validate
    from repcost.registry import DATASETS

    conf, pkgs = user_setup(tmp_path, preset_plugins=True)
    monkeypatch.syspath_prepend(str(pkgs))
    DATASETS.names()  # repcost's own datasets first; the plugin's registration is undone after the test
    monkeypatch.setattr(DATASETS, "_entries", dict(DATASETS._entries))
    monkeypatch.setattr(registry, "imported_plugins", set())
    try:
        spec = validate(compose_config(["experiment=ring-study", "device=cpu"], config_dirs=[conf]))
    finally:
        sys.modules.pop("ringdata", None)
    assert spec.data.name == "ring" and spec.data.n_points == 12 and spec.model.depth == 3
    assert "ring" in DATASETS.names()
