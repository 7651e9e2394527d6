"""The MNIST dataset (embedded 5,000 digits and IDX files): subsets, splits, autoencoder noise, errors."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from repcost.errors import ConfigError, RepcostError

from helpers import data_schema, dataset, rows, tensors


def test_same_seed_same_data_other_seed_other_data():
    a, b, c = dataset("mnist", n_train=60, n_test=30), dataset("mnist", n_train=60, n_test=30), dataset("mnist", seed=1, n_train=60, n_test=30)
    for t, u in zip(tensors(a), tensors(b)):
        assert torch.equal(t, u)
    assert not all(torch.equal(t, u) for t, u in zip(tensors(a), tensors(c)))
    assert a.x_train.dtype == torch.float64 and a.x_test is not None and a.x_test.shape[1] == a.d_in


def test_mnist_embedded_default_classification_balanced():
    b = dataset("mnist")
    assert b.task == "classification" and b.n_classes == 10 and b.d_out == 10
    assert b.x_train.shape == (1000, 784) and b.x_test.shape == (500, 784)
    assert b.y_train.dtype == torch.int64 and b.y_train.shape == (1000,)
    assert torch.equal(torch.bincount(b.y_train, minlength=10), torch.full((10,), 100))
    assert torch.equal(torch.bincount(b.y_test, minlength=10), torch.full((10,), 50))
    assert b.meta["digits"] == list(range(10)) and b.meta["source"].startswith("embedded:")
    assert float(b.x_train.min()) == 0.0 and float(b.x_train.max()) == 1.0
    assert not rows(b.x_train) & rows(b.x_test)  # train and test never overlap
    assert len(set(b.y_train[:20].tolist())) > 3  # shuffled, not sorted by label


def test_mnist_digit_subset_reindexed():
    b = dataset("mnist", digits=[7, 8, 9], n_train=42, n_test=30)
    assert b.n_classes == 3 and b.meta["digits"] == [7, 8, 9]
    assert b.meta["train_counts"] == [14, 14, 14] and b.meta["test_counts"] == [10, 10, 10]
    assert set(b.y_train.tolist()) == {0, 1, 2}
    full = dataset("mnist", n_train=4000, n_test=1000)  # every embedded digit, labelled 0..9
    lookup = {r.tobytes(): int(y) for r, y in zip(torch.cat([full.x_train, full.x_test]).numpy(),
                                                   torch.cat([full.y_train, full.y_test]))}
    assert all(lookup[r.tobytes()] == [7, 8, 9][int(y)] for r, y in zip(b.x_train.numpy(), b.y_train))
    r = dataset("mnist", digits=[9, 1], n_train=7, n_test=0)  # class i is digits[i]; remainder to the first
    assert r.meta["train_counts"] == [4, 3] and r.x_test is None
    assert all(lookup[x.tobytes()] == [9, 1][int(y)] for x, y in zip(r.x_train.numpy(), r.y_train))


def test_mnist_unbalanced_and_center():
    b = dataset("mnist", balanced=False, n_train=300, n_test=0)
    counts = torch.bincount(b.y_train, minlength=10)
    assert int(counts.sum()) == 300 and len(set(counts.tolist())) > 1
    c = dataset("mnist", normalise="center", n_train=200, n_test=50)
    u = dataset("mnist", n_train=200, n_test=50)
    mean = u.x_train.mean(0)
    assert torch.allclose(c.x_train.mean(0), torch.zeros(784, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(c.x_test, u.x_test - mean)
    assert torch.allclose(torch.tensor(c.meta["mean_image"], dtype=torch.float64), mean)


def test_mnist_autoencoder_noise_level():
    b = dataset("mnist", task="autoencoder", noise=0.3, digits=[3], n_train=400, n_test=100)
    assert b.task == "regression" and b.y_train.shape == (400, 784) and b.d_out == 784
    assert 0 <= float(b.y_train.min()) and float(b.y_train.max()) <= 1
    for x, y in ((b.x_train, b.y_train), (b.x_test, b.y_test)):
        assert abs(float((x - y).std()) - 0.3) < 0.005 and abs(float((x - y).mean())) < 0.005
    clean = dataset("mnist", task="autoencoder", digits=[3], n_train=400, n_test=100)
    assert torch.equal(clean.x_train, clean.y_train) and torch.equal(clean.y_train, b.y_train)


def test_mnist_too_many_samples_names_keys_and_count():
    with pytest.raises(ConfigError) as err:
        dataset("mnist", digits=[7, 8, 9], n_train=1000, n_test=600)
    assert err.value.key == "data.n_test" and "1500" in str(err.value) and "at most 500" in str(err.value)
    assert "data.source=full" in str(err.value)  # the way to more digits
    with pytest.raises(ConfigError) as err:
        dataset("mnist", digits=[7, 8, 9], n_train=1600, n_test=0)
    assert err.value.key == "data.n_train" and "1500" in str(err.value)
    dataset("mnist", digits=[7, 8, 9], n_train=1000, n_test=500)  # exactly all of them is fine


def test_mnist_embedded_file_missing_is_a_clear_error(monkeypatch):
    import repcost.data.mnist as m

    monkeypatch.setattr(m, "EMBEDDED", m.EMBEDDED.with_name("no_such_folder"))
    with pytest.raises(RepcostError, match="missing from the repcost install.*point data.root") as err:
        dataset("mnist", n_train=10, n_test=0)
    assert "\n" not in str(err.value)


def test_balanced_counts_caps_and_redistributes():
    from repcost.data.mnist import balanced_counts

    assert balanced_counts(10, np.array([5, 5, 5])).tolist() == [4, 3, 3]
    assert balanced_counts(10, np.array([1, 50, 50])).tolist() == [1, 5, 4]
    assert balanced_counts(6, np.array([0, 2, 9])).tolist() == [0, 2, 4]


# -- IDX files --------------------------------------------------------------------------------------------------
def _idx(path: Path, arr: np.ndarray, gz: bool) -> None:
    data = struct.pack(">BBBB", 0, 0, 0x08, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()
    if gz:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)


def _fake_mnist(folder: Path, n_train=60, n_test=20, gz=False, t10k=True):
    """Tiny IDX files: image i has pixel 0 = i % 256, pixel 1 = i // 256, pixel 2 = 100 + label (unique rows)."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n, base in (("train", n_train, 0), ("t10k", n_test, 10_000)):
        if split == "t10k" and not t10k:
            continue
        labels = (np.arange(n) % 10).astype(np.uint8)
        images = np.zeros((n, 28, 28), dtype=np.uint8)
        ids = np.arange(n) + base
        images[:, 0, 0], images[:, 0, 1], images[:, 0, 2] = ids % 256, ids // 256, 100 + labels
        _idx(folder / f"{split}-images-idx3-ubyte", images, gz)
        _idx(folder / f"{split}-labels-idx1-ubyte", labels, gz)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_idx_root_train_and_t10k(tmp_path, gz):
    _fake_mnist(tmp_path, gz=gz)
    b = dataset("mnist", root=str(tmp_path), n_train=30, n_test=10)
    assert b.x_train.shape == (30, 784) and b.meta["test_source"] == "t10k"
    assert b.meta["train_counts"] == [3] * 10 and b.meta["test_counts"] == [1] * 10
    px = (b.x_train * 255).round().long()
    assert torch.equal(px[:, 2] - 100, b.y_train)  # labels travel with their images
    assert bool((px[:, 1] < 39).all())  # from train-* (ids < 10,000)
    assert bool(((b.x_test * 255).round().long()[:, 1] >= 39).all())  # from t10k-*
    c = dataset("mnist", root=str(tmp_path), digits=[2, 5], n_train=8, n_test=4, task="autoencoder", noise=0.1)
    assert c.task == "regression" and set(((c.y_train * 255).round()[:, 2] - 100).long().tolist()) == {2, 5}


def test_mnist_idx_torchvision_layout_without_t10k(tmp_path):
    _fake_mnist(tmp_path / "MNIST" / "raw", n_train=100, gz=True, t10k=False)
    b = dataset("mnist", root=str(tmp_path), n_train=60, n_test=40)
    assert b.meta["test_source"] == "train pool" and not rows(b.x_train) & rows(b.x_test)
    assert len(rows(b.x_train) | rows(b.x_test)) == 100
    with pytest.raises(ConfigError) as err:
        dataset("mnist", root=str(tmp_path), n_train=60, n_test=41)
    assert err.value.key == "data.n_test" and "100" in str(err.value)


def test_mnist_bad_root_is_a_clear_error(tmp_path):
    with pytest.raises(RepcostError, match="not a folder.*train-images-idx3-ubyte"):
        dataset("mnist", root=str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(RepcostError, match=r"no train-images-idx3-ubyte\[\.gz\].*point data.root"):
        dataset("mnist", root=str(tmp_path / "empty"))
    _fake_mnist(tmp_path / "cut", n_train=20)
    f = tmp_path / "cut" / "train-images-idx3-ubyte"
    f.write_bytes(f.read_bytes()[:-100])
    with pytest.raises(RepcostError, match="truncated") as err:
        dataset("mnist", root=str(tmp_path / "cut"), n_train=5, n_test=0)
    assert "\n" not in str(err.value)
    _fake_mnist(tmp_path / "gzcut", n_train=20, gz=True)
    g = tmp_path / "gzcut" / "train-labels-idx1-ubyte.gz"
    g.write_bytes(g.read_bytes()[:15])
    with pytest.raises(RepcostError, match="cannot read"):
        dataset("mnist", root=str(tmp_path / "gzcut"), n_train=5, n_test=0)
    _fake_mnist(tmp_path / "magic", n_train=20)
    (tmp_path / "magic" / "train-labels-idx1-ubyte").write_bytes(b"hello world")
    with pytest.raises(RepcostError, match="magic"):
        dataset("mnist", root=str(tmp_path / "magic"), n_train=5, n_test=0)
    _fake_mnist(tmp_path / "shape", n_train=20)
    _idx(tmp_path / "shape" / "train-labels-idx1-ubyte", np.arange(19, dtype=np.uint8) % 10, gz=False)  # 19 for 20
    with pytest.raises(RepcostError, match=r"one label 0\.\.9 each") as err:
        dataset("mnist", root=str(tmp_path / "shape"), n_train=5, n_test=0)
    assert "(20, 28, 28) images and (19,) labels" in str(err.value)


BAD = [
    ("mnist", dict(digits=[1, 1]), "digits"),
    ("mnist", dict(digits=[10]), "digits"),
    ("mnist", dict(digits=[]), "digits"),
    ("mnist", dict(digits=[3]), "digits"),  # one class cannot be a classification
    ("mnist", dict(task="regression"), "task"),
    ("mnist", dict(n_train=0), "n_train"),
    ("mnist", dict(n_test=-1), "n_test"),
    ("mnist", dict(noise=0.1), "noise"),  # noise only for autoencoders
    ("mnist", dict(task="autoencoder", noise=-0.1), "noise"),
    ("mnist", dict(normalise="zscore"), "normalise"),
    ("mnist", dict(root=""), "root"),
]


@pytest.mark.parametrize("name,kw,key", BAD)
def test_bad_values_raise_config_error(name, kw, key):
    with pytest.raises(ConfigError) as err:
        data_schema(name, **kw)
    assert err.value.key == key
