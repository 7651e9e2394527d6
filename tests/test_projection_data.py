"""The projection dataset (Ongie & Willett Fig 1): labels depend on uᵀx only."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from repcost.data import DATASETS, load_data
from repcost.errors import ConfigError


def make(**kw):
    return DATASETS.get("projection").schema(**kw)


def test_labels_depend_only_on_the_projection():
    b = load_data(make(n_points=50, n_test=10, direction=[2.0, 1.0], profile="sin"))
    u = np.array(b.meta["direction"])
    perp = np.array(b.meta["perpendicular"])
    assert abs(np.linalg.norm(u) - 1) < 1e-12 and abs(u @ perp) < 1e-12
    x = b.x_train.numpy()
    assert np.allclose(b.y_train.numpy()[:, 0], np.sin(np.pi * x @ u))
    # moving a point perpendicular to u leaves its label unchanged
    b2 = load_data(make(n_points=50, direction=[2.0, 1.0], profile="abs"))
    assert np.allclose(np.abs((x + 0.3 * perp) @ u), b2.y_train.numpy()[:, 0])
    assert b.x_test.shape == (10, 2) and b.y_test.shape == (10, 1)
    assert b.x_train.dtype == torch.float64 and np.all(np.abs(x) <= 1.0)


def test_seeded():
    a, b, c = (load_data(make(seed=s)) for s in (0, 0, 1))
    assert torch.equal(a.x_train, b.x_train) and not torch.equal(a.x_train, c.x_train)


@pytest.mark.parametrize("kw,key", [(dict(direction=[0.0, 0.0]), "direction"), (dict(direction=[1.0]), "direction"),
                                    (dict(profile="nope"), "profile"), (dict(n_points=0), "n_points")])
def test_bad_config(kw, key):
    with pytest.raises(ConfigError, match=key):
        make(**kw)
