"""Provenance in summary.json, and plugin sources in the run identity (a changed plugin makes its run stale)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import pytest
import torch
from omegaconf import OmegaConf


from helpers import REPO, TINY


def test_provenance():
    from repcost.provenance import git_commit, provenance

    p = provenance()
    assert p["repcost_version"] == version("repcost") and p["python_version"] == sys.version.split()[0]
    assert p["torch_version"] == torch.__version__ and isinstance(p["plugins"], dict)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    if head:  # run from a checkout
        assert git_commit().removesuffix("-dirty") == head


PLUGIN = '''
import torch
from dataclasses import dataclass
from repcost.data import DataBundle
from repcost.registry import DATASETS


@dataclass
class LineConfig:
    name: str = "line"
    n_points: int = 6


@DATASETS.register("line", LineConfig)
def load_line(cfg: LineConfig) -> DataBundle:
    x = torch.linspace(-1, 1, cfg.n_points, dtype=torch.float64)[:, None]
    return DataBundle("line", x, SLOPE * x)


SLOPE = 2.0
'''


@pytest.mark.slow
def test_a_plugin_source_change_makes_its_finished_run_stale(tmp_path, run_cli):
    import hashlib

    pkgs, conf = tmp_path / "pkgs", tmp_path / "conf"
    (pkgs / "linedata").mkdir(parents=True)
    (conf / "data").mkdir(parents=True)
    (conf / "data" / "line.yaml").write_text("name: line\nn_points: 6\n")
    src = pkgs / "linedata" / "__init__.py"
    src.write_text(PLUGIN)
    sweep = tmp_path / "sweep"
    args = ["--config-dir", str(conf), "-m", "data=line", "plugins=[linedata]", "model.width=4", *TINY,
            f"hydra.sweep.dir={sweep}"]

    def train() -> subprocess.CompletedProcess:
        p = run_cli("repcost-train", *args, cwd=tmp_path, env={"PYTHONPATH": str(pkgs)})
        assert p.returncode == 0, p.stderr
        return p

    train()
    (job,) = [d for d in sweep.iterdir() if (d / "FINISHED").exists()]
    saved = OmegaConf.load(job / ".hydra" / "config.yaml")
    assert dict(saved.plugin_sources) == {"linedata": hashlib.sha256(src.read_bytes()).hexdigest()}
    first = (job / "FINISHED").read_text()
    assert "already finished" in train().stdout  # unchanged plugin: the finished run is reused
    src.write_text(PLUGIN.replace("SLOPE = 2.0", "SLOPE = -3.0"))
    train()
    assert (job / "FINISHED").read_text() != first  # a new identity, trained afresh
    (aside,) = [d for d in sweep.iterdir() if d.name.startswith(f"{job.name}.stale-")]  # (the name holds [ ])
    assert (aside / "FINISHED").read_text() == first
    assert "another config (source of plugin linedata;" in (aside / "MOVED_ASIDE").read_text()


def test_runs_without_plugins_keep_their_identity():
    from repcost.identity import run_hash

    cfg = json.loads((REPO / "tests" / "fixtures" / "legacy_run" / "summary.json").read_text())
    saved = OmegaConf.to_container(OmegaConf.load(REPO / "tests" / "fixtures" / "legacy_run" / ".hydra" /
                                                  "config.yaml"), resolve=False)
    assert run_hash({**saved, "plugin_sources": {}}) == run_hash(saved)
    assert run_hash({**saved, "plugin_sources": {"m": "0" * 64}}) != run_hash(saved)
    assert cfg["config_hash"]  # the fixture's own record (test_identity checks that it is still recognised)
