"""The S-curves (Jacot 2023 Fig 2) and plane-curve (Fig 3) datasets: shapes, spacing, noise, distances, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from repcost.data import load_data
from repcost.errors import ConfigError

from helpers import data_schema, dataset, tensors


@pytest.mark.parametrize("name", ["s_curves", "curve_2d"])
def test_same_seed_same_data_other_seed_other_data(name):
    a, b, c = dataset(name), dataset(name), dataset(name, seed=1)
    for t, u in zip(tensors(a), tensors(b)):
        assert torch.equal(t, u)
    assert not all(torch.equal(t, u) for t, u in zip(tensors(a), tensors(c)))
    assert a.x_train.dtype == torch.float64 and a.x_test is not None and a.x_test.shape[1] == a.d_in


def test_s_curves_classes_are_x_translates():
    from repcost.data.s_curves import T_MAX, inverted_s

    b = dataset("s_curves", sampling="even", n_per_class=40, n_test_per_class=0)
    assert b.task == "classification" and b.n_classes == 4 and b.x_train.shape == (160, 2) and b.x_test is None
    assert torch.equal(b.y_train, torch.arange(4).repeat_interleave(40))
    assert b.meta["offsets"] == [-2.25, -0.75, 0.75, 2.25]
    base = b.x_train[b.y_train == 0]
    for c in range(1, 4):
        shift = torch.tensor([1.5 * c, 0.0], dtype=torch.float64)
        assert torch.allclose(b.x_train[b.y_train == c], base + shift, atol=1e-12)
    r = dataset("s_curves", n_per_class=30, n_test_per_class=20, spacing=2.0)
    dense = torch.from_numpy(inverted_s(np.linspace(-T_MAX, T_MAX, 20001)))
    for x, y in ((r.x_train, r.y_train), (r.x_test, r.y_test)):
        assert torch.equal(torch.bincount(y), torch.full((4,), len(y) // 4))
        for c in range(4):
            local = x[y == c] - torch.tensor([(c - 1.5) * 2.0, 0.0], dtype=torch.float64)
            assert float(torch.cdist(local, dense).min(1).values.max()) < 1e-3  # on the same curve


def test_s_curve_is_an_inverted_s():
    from repcost.data.s_curves import T_MAX, inverted_s

    ends = inverted_s(np.array([-T_MAX, -math.pi, 0.0, math.pi, T_MAX]))
    assert np.allclose(ends, [[-0.5, 0.5], [0, 1], [0, 0], [0, -1], [0.5, -0.5]])  # Ƨ: top-left to bottom-right
    noisy = dataset("s_curves", sampling="even", noise=0.1, n_per_class=500, n_test_per_class=0)
    clean = dataset("s_curves", sampling="even", n_per_class=500, n_test_per_class=0)
    assert abs(float((noisy.x_train - clean.x_train).std()) - 0.1) < 0.005


def test_wave_s_curves_interleave_without_touching():
    """shape=wave: even samples are equally spaced along the curve; at spacing 0.3 classes interleave in x but never meet."""
    from repcost.data.s_curves import T_MAX, inverted_s_wave

    ends = inverted_s_wave(np.array([-T_MAX, -math.pi / 2, 0.0, math.pi / 2, T_MAX]))
    # Ƨ from the bottom-right end, bulging left below the centre and right above it, to the top-left end
    assert np.allclose(ends, [[0.5, -1], [-0.5, -1 / 3], [0, 0], [0.5, 1 / 3], [-0.5, 1]])
    b = dataset("s_curves", shape="wave", spacing=0.3, sampling="even", n_per_class=400, n_test_per_class=0)
    x, y = b.x_train, b.y_train
    steps = (x[1:400] - x[:399]).norm(dim=1)
    assert float(steps.max() / steps.min()) < 1.01  # uniform in arc length, not in t
    lo = [float(x[y == c, 0].min()) for c in range(4)]
    hi = [float(x[y == c, 0].max()) for c in range(4)]
    assert all(hi[c] > lo[c + 1] + 0.5 for c in range(3))  # x-ranges overlap: no vertical stripes separate them
    gaps = torch.cdist(x[y == 0], x[y == 1]).min()
    assert float(gaps) > 0.1  # the translates keep apart (a graph over y never meets its x-translate)


def test_arc_s_curves_refuse_touching_spacing():
    with pytest.raises(ConfigError, match="spacing"):
        data_schema("s_curves", spacing=0.8)
    with pytest.raises(ConfigError, match="shape"):
        data_schema("s_curves", shape="zigzag")
    assert data_schema("s_curves", shape="wave", spacing=0.3).spacing == 0.3


@pytest.mark.parametrize("shape", ["sine", "arc", "spiral", "circle"])
def test_curve_2d_on_curve_and_noise(shape):
    from repcost.data.curve_2d import distance_to_curve

    cfg = data_schema("curve_2d", shape=shape, noise=0.05, n_train=2000, n_test=50)
    b = load_data(cfg)
    assert b.task == "regression" and b.x_train.shape == (2000, 2) and b.y_train.shape == (2000, 2)
    for y in (b.y_train, b.y_test):
        assert float(distance_to_curve(cfg, y).max()) < 1e-6
    assert abs(float((b.x_train - b.y_train).std()) - 0.05) < 0.003
    assert float(b.y_train.abs().max()) <= 1 + 1e-12


def test_curve_2d_even_spacing_and_distances():
    from repcost.data.curve_2d import curve_points, distance_to_curve

    circle = data_schema("curve_2d", shape="circle")
    pts = torch.tensor([[2.0, 0.0], [0.0, 0.5], [0.6, 0.8], [-3.0, -4.0]], dtype=torch.float64)
    assert np.allclose(distance_to_curve(circle, pts), [1.0, 0.5, 0.0, 4.0], atol=1e-6)
    d = distance_to_curve(circle, np.array([[2.0, 0.0]]))
    assert isinstance(d, np.ndarray) and np.allclose(d, [1.0], atol=1e-6)
    sine = data_schema("curve_2d", shape="sine", amplitude=0.5)
    xs = np.linspace(-1, 1, 400_001)
    brute = np.hypot(xs - 0.1, 0.5 * np.sin(math.pi * xs) - 0.4).min()  # brute force for the point (0.1, 0.4)
    assert float(distance_to_curve(sine, torch.tensor([[0.1, 0.4]]))[0]) == pytest.approx(brute, abs=1e-7)
    assert float(distance_to_curve(sine, torch.tensor([[1.5, 0.0]]))[0]) == pytest.approx(0.5, abs=1e-9)  # end point
    for shape in ("sine", "spiral"):
        cfg = data_schema("curve_2d", shape=shape, sampling="even", n_train=400, n_test=0)
        gaps = load_data(cfg).y_train.diff(dim=0).norm(dim=1)
        assert float(gaps.max() / gaps.min()) < 1.001  # equally spaced in arc length
        assert torch.allclose(curve_points(cfg, 400), load_data(cfg).y_train)
    assert torch.allclose(curve_points(circle, 4), torch.tensor([[1.0, 0], [0, 1], [-1, 0], [0, -1]],
                                                                dtype=torch.float64), atol=1e-6)


BAD = [
    ("s_curves", dict(n_classes=1), "n_classes"),
    ("s_curves", dict(n_per_class=0), "n_per_class"),
    ("s_curves", dict(spacing=0.0), "spacing"),
    ("s_curves", dict(noise=-1.0), "noise"),
    ("s_curves", dict(sampling="grid"), "sampling"),
    ("curve_2d", dict(shape="square"), "shape"),
    ("curve_2d", dict(n_train=0), "n_train"),
    ("curve_2d", dict(noise=-0.1), "noise"),
    ("curve_2d", dict(turns=0.0), "turns"),
]


@pytest.mark.parametrize("name,kw,key", BAD)
def test_bad_values_raise_config_error(name, kw, key):
    with pytest.raises(ConfigError) as err:
        data_schema(name, **kw)
    assert err.value.key == key
