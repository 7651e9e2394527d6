"""Synthetic datasets (points_1d, two_rays, teacher, rank_k, bipartite): determinism, shapes, the papers' defining
properties, config validation."""

from __future__ import annotations

import math

import pytest
import torch

from repcost.data import load_data
from repcost.errors import ConfigError

from helpers import data_schema, dataset, tensors

SYNTHETIC = ["points_1d", "two_rays", "teacher", "rank_k", "bipartite"]
SMALL = {"teacher": dict(n_train=50, n_test=20), "rank_k": dict(n_train=60, n_test=20)}
RANDOM = {"points_1d": {}, "two_rays": dict(spacing="random"), **SMALL}


@pytest.mark.parametrize("name", SYNTHETIC)
def test_shapes_dtypes_and_same_seed_same_data(name):
    a, b = dataset(name, **SMALL.get(name, {})), dataset(name, **SMALL.get(name, {}))
    assert a.task == "regression" and a.x_train.ndim == 2 and a.y_train.ndim == 2
    assert a.x_train.shape[0] == a.y_train.shape[0]
    for t, u in zip(tensors(a), tensors(b)):
        assert t.dtype == torch.float64 and torch.equal(t, u)
    if a.x_test is not None:
        assert a.x_test.shape[1] == a.d_in and a.y_test.shape[1] == a.d_out


@pytest.mark.parametrize("name", list(RANDOM))
def test_other_seed_other_data(name):
    a, b = dataset(name, seed=0, **RANDOM[name]), dataset(name, seed=1, **RANDOM[name])
    assert not all(torch.equal(t, u) for t, u in zip(tensors(a), tensors(b)))


@pytest.mark.parametrize("name", ["teacher", "rank_k"])
def test_teacher_seed_changes_targets_not_inputs(name):
    a, b = dataset(name, teacher_seed=0, **SMALL[name]), dataset(name, teacher_seed=1, **SMALL[name])
    assert torch.equal(a.x_train, b.x_train) and not torch.equal(a.y_train, b.y_train)


def test_points_1d_defaults_and_options():
    b = dataset("points_1d")
    assert b.x_train.shape == (10, 1) and b.y_train.shape == (10, 1) and b.x_test is None
    assert torch.allclose(b.x_train[:, 0], torch.linspace(-1, 1, 10, dtype=torch.float64))
    assert b.y_train.abs().max() <= 1 and b.y_train.std() > 0.1
    r = dataset("points_1d", x_spacing="random", n_points=7)
    assert r.x_train.shape == (7, 1) and bool((r.x_train.diff(dim=0) > 0).all())
    s = dataset("points_1d", y_dist="sin", y_scale=2.0, n_test=30)
    assert torch.allclose(s.y_train, 2 * torch.sin(math.pi * s.x_train))
    assert s.x_test.shape == (30, 1) and torch.allclose(s.y_test, 2 * torch.sin(math.pi * s.x_test))
    e = dataset("points_1d", x=[0.5, -1.0, 2.0], y=[1.0, 0.0, 3.0])
    assert e.x_train[:, 0].tolist() == [-1.0, 0.5, 2.0] and e.y_train[:, 0].tolist() == [0.0, 1.0, 3.0]


def test_two_rays_on_rays_and_interpolated_by_two_relus():
    cfg = data_schema("two_rays")
    b = load_data(cfg)
    w1, w2, w0 = (torch.tensor(b.meta[k], dtype=torch.float64) for k in ("w1", "w2", "w0"))
    assert torch.allclose(w1, torch.tensor([2.0, 1.0], dtype=torch.float64) / math.sqrt(5))
    assert math.isclose(float(w1 @ w2), math.cos(2 * math.pi / 3), abs_tol=1e-12)
    assert math.isclose(float(w0.norm()), 1.0) and float(w1 @ w2) < 0
    ray = torch.tensor(b.meta["ray"])
    assert b.x_train.shape == (10, 2) and int((ray == 0).sum()) == 5
    for j, w in enumerate((w1, w2)):
        x = b.x_train[ray == j]
        t = x @ w
        assert torch.allclose(x, t[:, None] * w[None, :], atol=1e-14) and bool((t > 0).all())
    f = torch.relu(b.x_train @ w1) + torch.relu(b.x_train @ w2)
    assert torch.allclose(f, b.y_train[:, 0], atol=1e-14)
    c = dataset("two_rays", angle_pi=0.55, slopes=[2.0, -1.0], offsets=[0.5, 0.0])
    assert math.isclose(c.meta["angle"], 0.55 * math.pi)
    t0 = c.x_train[torch.tensor(c.meta["ray"]) == 0] @ torch.tensor(c.meta["w1"], dtype=torch.float64)
    assert torch.allclose(c.y_train[:5, 0], 2 * t0 + 0.5)


def test_teacher_default_architecture():
    from repcost.data.bundle import rng
    from repcost.data.teacher import random_relu_net, relu_net_forward

    cfg = data_schema("teacher", n_train=40, n_test=10)
    b = load_data(cfg)
    assert b.x_train.shape == (40, 50) and b.y_train.shape == (40, 10) and b.x_test.shape == (10, 50)
    params = random_relu_net(list(cfg.widths), rng(cfg.teacher_seed, 0))  # the teacher: β = 0 by default
    assert [tuple(w.shape) for w, _ in params] == [(10, 50), (10, 10), (10, 10)]
    assert torch.equal(relu_net_forward(params, b.x_train), b.y_train)
    noisy = dataset("teacher", n_train=40, n_test=10, noise=0.1)
    assert torch.equal(noisy.x_train, b.x_train) and torch.equal(noisy.y_test, b.y_test)
    assert 0.05 < float((noisy.y_train - b.y_train).std()) < 0.2


def test_rank_k_jacobian_has_rank_k():
    from repcost.data.rank_k import rank_k_function

    cfg = data_schema("rank_k", n_train=30, n_test=0)
    b = load_data(cfg)
    assert b.meta["k"] == 5 and b.x_train.shape == (30, 50) and b.y_train.shape == (30, 50)
    f = rank_k_function(cfg)
    assert torch.equal(f(b.x_train), b.y_train)
    for x in b.x_train[:5]:
        s = torch.linalg.svdvals(torch.autograd.functional.jacobian(f, x[None])[0, :, 0, :])
        assert float(s[5] / s[0]) < 1e-12 < 1e-3 < float(s[4] / s[0])  # rank exactly k = 5
    small = data_schema("rank_k", k=2, d_in=6, d_out=7, hidden=20, n_train=5, n_test=0)
    jac = torch.autograd.functional.jacobian(rank_k_function(small), load_data(small).x_train)
    assert all(int(torch.linalg.matrix_rank(jac[i, :, i, :])) == 2 for i in range(5))


def test_rank_k_linear_g_is_a_k_index_model():
    """g_hidden = 0: f*(x) = h(Px), so the Jacobians at all points share one k-dim row space;
    with a ReLU g they do not (each point's active units give a different row space)."""
    from repcost.data.rank_k import rank_k_function

    def joint_rank(**kw):
        cfg = data_schema("rank_k", k=3, d_in=12, d_out=8, n_train=10, n_test=0, **kw)
        x = load_data(cfg).x_train
        jac = torch.autograd.functional.jacobian(rank_k_function(cfg), x)
        rows = torch.cat([jac[i, :, i, :] for i in range(x.shape[0])])  # (10·8) × 12 stacked Jacobians
        return int(torch.linalg.matrix_rank(rows))

    assert joint_rank(g_hidden=0) == 3
    assert joint_rank() > 3


def test_rank_k_relu_bottleneck_is_nonnegative_and_shifted():
    """bottleneck = relu: f*(x) = h(ReLU(Px + c)); the Jacobian rank at x is the number of units with Px + c > 0."""
    from repcost.data.bundle import rng
    from repcost.data.teacher import random_relu_net, relu_net_forward
    from repcost.data.rank_k import rank_k_function, true_jacobian_ranks

    for shift in (0.0, 1.0):
        cfg = data_schema("rank_k", k=4, d_in=10, d_out=6, g_hidden=0, n_train=40, n_test=0, bottleneck="relu",
                   bottleneck_shift=shift)
        x = load_data(cfg).x_train
        gen = rng(cfg.teacher_seed, 0)  # the same draws as rank_k_function: P first, then h
        (p, _), = random_relu_net([10, 4], gen)
        h = random_relu_net([4, cfg.hidden, 6], gen)
        z = x @ p.T + shift
        assert torch.allclose(rank_k_function(cfg)(x), relu_net_forward(h, torch.relu(z)))
        active = (z > 0).sum(1).numpy()
        assert list(true_jacobian_ranks(cfg, x)) == list(active) and len(set(active)) > 1
    linear = data_schema("rank_k", g_hidden=0, n_train=20, n_test=0)
    assert not torch.equal(load_data(linear).y_train,
                           load_data(data_schema("rank_k", g_hidden=0, n_train=20, n_test=0, bottleneck="relu")).y_train)


def test_bipartite_matches_definition_by_hand():
    from repcost.data.bipartite import bipartite_incidence

    b = dataset("bipartite", n=4)
    assert torch.equal(b.x_train, torch.eye(4, dtype=torch.float64)) and b.x_test is None
    expected = torch.tensor([[2, 0, 1, 1], [0, 2, 1, 1], [1, 1, 2, 0], [1, 1, 0, 2]], dtype=torch.float64)
    assert torch.equal(b.y_train, expected)
    e = bipartite_incidence(4)
    assert e.shape == (4, 4) and bool((e.sum(1) == 2).all()) and b.meta["cp_rank"] == 4
    big = dataset("bipartite", n=10)
    assert big.y_train.shape == (10, 10) and bipartite_incidence(10).shape == (25, 10)
    assert torch.equal(big.y_train[:5, :5], 5 * torch.eye(5, dtype=torch.float64))
    assert torch.equal(big.y_train[:5, 5:], torch.ones(5, 5, dtype=torch.float64))


@pytest.mark.parametrize("n", [2, 4, 6, 10])
def test_bipartite_incidence_lists_the_edges_in_order(n):
    """Row e of E is edge (u, v), u-major over u < N/2 ≤ v, with ones at u and v: built here one edge at a time."""
    from repcost.data.bipartite import bipartite_incidence

    edges = [(u, v) for u in range(n // 2) for v in range(n // 2, n)]
    expected = torch.zeros(len(edges), n, dtype=torch.float64)
    for row, (u, v) in enumerate(edges):
        expected[row, u] = expected[row, v] = 1.0
    assert torch.equal(bipartite_incidence(n), expected)


BAD = [
    ("points_1d", dict(n_points=1), "n_points"),
    ("points_1d", dict(x_min=1.0, x_max=0.0), "x_max"),
    ("points_1d", dict(x_spacing="log"), "x_spacing"),
    ("points_1d", dict(y_dist="tan"), "y_dist"),
    ("points_1d", dict(x=[0.0, 0.0]), "x"),
    ("points_1d", dict(x=[0.0]), "x"),
    ("points_1d", dict(x=[0.0, 1.0], y=[1.0]), "y"),
    ("points_1d", dict(y=[1.0, 2.0]), "y"),
    ("points_1d", dict(n_test=5), "n_test"),
    ("two_rays", dict(angle=math.pi / 2), "angle"),
    ("two_rays", dict(angle=math.pi), "angle"),
    ("two_rays", dict(angle=1.0), "angle"),
    ("two_rays", dict(angle_pi=0.4), "angle_pi"),
    ("two_rays", dict(w1=[0.0, 0.0]), "w1"),
    ("two_rays", dict(points_per_ray=0), "points_per_ray"),
    ("two_rays", dict(t_min=0.0), "t_min"),
    ("two_rays", dict(t_min=1.0, t_max=0.5), "t_max"),
    ("two_rays", dict(slopes=[1.0]), "slopes"),
    ("teacher", dict(n_train=0), "n_train"),
    ("teacher", dict(n_test=-1), "n_test"),
    ("teacher", dict(widths=[50]), "widths"),
    ("teacher", dict(widths=[50, 0, 10]), "widths"),
    ("teacher", dict(noise=-0.1), "noise"),
    ("teacher", dict(seed=-1), "seed"),
    ("rank_k", dict(n_train=0), "n_train"),
    ("rank_k", dict(k=0), "k"),
    ("rank_k", dict(d_in=0), "d_in"),
    ("rank_k", dict(bottleneck="tanh"), "bottleneck"),
    ("rank_k", dict(bottleneck_shift=1.0), "bottleneck_shift"),
    ("bipartite", dict(n=5), "n"),
    ("bipartite", dict(n=0), "n"),
]


@pytest.mark.parametrize("name,kw,key", BAD)
def test_bad_values_raise_config_error(name, kw, key):
    with pytest.raises(ConfigError) as err:
        data_schema(name, **kw)
    assert err.value.key == key
