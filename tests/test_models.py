"""Model families: shapes, ReLU rescaling invariance, parallel vs loop, linear_relu vs hand-built."""

from __future__ import annotations

import math

import pytest
import torch

from repcost.errors import ConfigError
from repcost.models import MODELS, build_model

D_IN, D_OUT, N = 3, 2, 7


def make(name, **kw):
    return build_model(MODELS.get(name).schema(**kw), D_IN, D_OUT, seed=1)


CASES = [("fc", dict(depth=3, width=5)), ("fc", dict(depth=4, width=[4, 6, 3], slope=0.2, beta=0.5)),
         ("fc", dict(depth=2, width=6, beta=0.0)), ("linear_relu", dict(depth=2, width=6)),
         ("linear_relu", dict(depth=4, width=6, linear_width=3)), ("parallel", dict(depth=3, n_subnets=4, width=3)),
         ("parallel", dict(depth=2, n_subnets=5, width=3))]


@pytest.mark.parametrize("name,kw", CASES)
def test_shapes_and_interface(name, kw):
    m = make(name, **kw)
    x = torch.randn(N, D_IN, dtype=torch.float64)
    assert m(x).shape == (N, D_OUT)
    assert len(m.weight_matrices()) == m.depth == kw["depth"]
    hs = m.hidden(x)
    assert len(hs) == m.depth - 1
    assert all(h.pre.shape == h.post.shape and h.pre.shape[0] == N for h in hs)
    sq = sum((p ** 2).sum() for p in m.regularised_params())
    assert torch.allclose(m.param_sq_norm(), sq)
    assert torch.allclose(m.cost(), sq / m.depth)


def _rescale_unit(m, c, unit=1):
    """Multiply one ReLU unit's incoming weights (and bias) by c and its outgoing weights by 1/c."""
    with torch.no_grad():
        if m.family == "fc":
            m.weights[0][unit] *= c
            if len(m.biases):
                m.biases[0][unit] *= c
            m.weights[1][:, unit] /= c
        elif m.family == "linear_relu":
            m.linear[-1][unit] *= c
            m.b[unit] *= c
            m.a[:, unit] /= c
        else:
            m.sub[0][0, unit] *= c
            m.sub[1][0, :, unit] /= c


@pytest.mark.parametrize("name,kw", [c for c in CASES if not (c[0] == "fc" and c[1].get("slope"))] +
                         [("fc", dict(depth=3, width=5, slope=-0.5))])
def test_relu_unit_rescaling_keeps_function(name, kw):
    if name == "parallel" and kw["depth"] == 2:
        pytest.skip("depth-2 parallel has no hidden unit inside a sub-network")
    m = make(name, **kw)
    x = torch.randn(N, D_IN, dtype=torch.float64)
    y0 = m(x).detach()
    ps = [p.detach().clone() for p in m.regularised_params()]
    c = 2.5
    _rescale_unit(m, c)
    assert torch.allclose(m(x), y0, atol=1e-12)
    # hand count of the norm change: incoming (and regularised bias) × c², outgoing ÷ c²
    if name == "fc":
        w_in, w_out = ps[0][1], ps[1][:, 1]
        extra = (ps[m.depth][1] ** 2) if m.structure.biases == "regularised" else 0.0
        inc = (w_in ** 2).sum() + extra
    elif name == "linear_relu":
        w_in, w_out = ps[m.depth - 2][1], ps[-1][:, 1]
        inc = (w_in ** 2).sum()
    else:
        w_in, w_out = ps[0][0, 1], ps[1][0, :, 1]
        inc = (w_in ** 2).sum()
    out = (w_out ** 2).sum()
    expected = sum((p ** 2).sum() for p in ps) + (c ** 2 - 1) * inc + (c ** -2 - 1) * out
    assert torch.allclose(m.param_sq_norm(), expected, rtol=1e-12)


def test_parallel_equals_loop_over_subnetworks():
    m = make("parallel", depth=4, n_subnets=5, width=3)
    x = torch.randn(N, D_IN, dtype=torch.float64)
    out = torch.zeros(N, D_OUT, dtype=torch.float64)
    for i in range(5):
        h = x
        for W in m.sub:
            h = torch.relu(h @ W[i].T)
        out += h[:, :1] * m.alpha[:, i]
    assert torch.allclose(m(x), out, atol=1e-12)


def test_linear_relu_depth2_is_plain_two_layer_net():
    m = make("linear_relu", depth=2, width=6)
    with torch.no_grad():
        m.c.copy_(torch.tensor([0.3, -0.2]))
        m.b.copy_(torch.randn(6))
    x = torch.randn(N, D_IN, dtype=torch.float64)
    W, b, a, c = m.linear[0], m.b, m.a, m.c
    hand = torch.stack([sum(a[o, k] * torch.relu(W[k] @ x[i] + b[k]) for k in range(6)) + c[o]
                        for i in range(N) for o in range(D_OUT)]).reshape(N, D_OUT)
    assert torch.allclose(m(x), hand, atol=1e-12)


def test_linear_relu_effective_matrix():
    m = make("linear_relu", depth=4, width=6, linear_width=3)
    W = m.linear[2] @ m.linear[1] @ m.linear[0]
    assert torch.allclose(m.effective_matrix(), W)
    x = torch.randn(N, D_IN, dtype=torch.float64)
    assert torch.allclose(m(x), torch.relu(x @ W.T + m.b) @ m.a.T + m.c, atol=1e-12)


def test_fc_bias_amount_and_regularisation():
    m = make("fc", depth=3, width=4, beta=0.5, bias_regularised=False)
    assert len(m.regularised_params()) == 3
    with torch.no_grad():
        m.biases[2].fill_(1.0)
    x = torch.randn(N, D_IN, dtype=torch.float64)
    h = torch.relu(torch.relu(x @ m.weights[0].T + 0.5 * m.biases[0]) @ m.weights[1].T + 0.5 * m.biases[1])
    assert torch.allclose(m(x), h @ m.weights[2].T + 0.5, atol=1e-12)
    m2 = make("fc", depth=3, width=4, beta=0.5, bias_regularised=True)
    assert len(m2.regularised_params()) == 6


def test_init_scale_and_seed():
    a = make("fc", depth=3, width=50, init_scale=1.0)
    b = make("fc", depth=3, width=50, init_scale=0.1)
    assert torch.allclose(b.weights[1], 0.1 * a.weights[1])
    c = build_model(MODELS.get("fc").schema(depth=3, width=50), D_IN, D_OUT, seed=2)
    assert not torch.allclose(a.weights[0], c.weights[0])


def test_linear_relu_kink_range():
    """kink_range = 0 keeps zero biases and every weight draw; R > 0 puts unit k's hyperplane through a point of
    [−R, R]^d (for d = 1: the kink −b_k/w_k lies in [−R, R]) without changing the weights."""
    for depth in (2, 3):
        base = build_model(MODELS.get("linear_relu").schema(depth=depth, width=40), 1, 1, seed=3)
        spread = build_model(MODELS.get("linear_relu").schema(depth=depth, width=40, kink_range=2.0), 1, 1, seed=3)
        assert torch.all(base.b == 0)
        for p, q in zip(base.weight_matrices(), spread.weight_matrices()):
            assert torch.equal(p, q)
        w = spread.effective_matrix()[:, 0]
        kinks = -spread.b / w
        assert kinks.abs().max() <= 2.0 and kinks.abs().max() > 1.0  # spread over the box, not at the origin


def test_linear_relu_kinks_over_data(tmp_path):
    """kinks_over_data puts every kink inside the training inputs' range (for d = 1: −b_k/w_k in [min x, max x],
    spread over it), leaves every weight draw unchanged, and is what repcost-train starts from; without the
    inputs (a model built to load a checkpoint into) the biases stay 0."""
    from omegaconf import OmegaConf

    from repcost.config import compose_config, validate
    from repcost.train.run import train_run

    schema = MODELS.get("linear_relu").schema
    x = torch.tensor([[-4.0], [-3.5], [-2.5], [-2.2]], dtype=torch.float64)
    base = build_model(schema(width=200), 1, 1, seed=3)
    over = build_model(schema(width=200, kinks_over_data=True), 1, 1, seed=3, x_train=x)
    for p, q in zip(base.weight_matrices(), over.weight_matrices()):
        assert torch.equal(p, q)
    kinks = -over.b / over.effective_matrix()[:, 0]
    assert kinks.min() >= -4.0 and kinks.max() <= -2.2 and kinks.max() - kinks.min() > 1.5
    assert torch.all(build_model(schema(width=20, kinks_over_data=True), 1, 1, seed=3).b == 0)
    with pytest.raises(ConfigError, match="kink_range"):
        schema(kinks_over_data=True, kink_range=1.0)
    cfg = compose_config(["model=linear_relu", "model.kinks_over_data=true", "data=points_1d", "data.x=[3,4,6]",
                          "data.y=[0,1,0]", "train=gd", "train.phases.0.steps=0", "train.progress=false"])
    train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / "r")
    sd = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=False)["trainer"]["model"]
    kinks = -sd["b"] / sd["linear.0"][:, 0]
    assert kinks.min() >= 3.0 and kinks.max() <= 6.0


def test_linear_relu_kinks_per_gap():
    """kinks_per_gap: each gap between consecutive points gets about width/(N−1) kinks, a narrow one as many as a
    wide one (over the data's range the narrow gap below would get about 0.5 % of them); weight draws unchanged."""
    schema = MODELS.get("linear_relu").schema
    x = torch.tensor([[0.0], [10.0], [10.05], [20.0]], dtype=torch.float64)  # gaps 10, 0.05, 9.95
    base = build_model(schema(width=3000), 1, 1, seed=5)
    per_gap = build_model(schema(width=3000, kinks_per_gap=True), 1, 1, seed=5, x_train=x)
    for p, q in zip(base.weight_matrices(), per_gap.weight_matrices()):
        assert torch.equal(p, q)
    kinks = -per_gap.b / per_gap.effective_matrix()[:, 0]
    counts = [int(((kinks >= lo) & (kinks <= hi)).sum()) for lo, hi in ((0, 10), (10, 10.05), (10.05, 20))]
    assert sum(counts) == 3000 and all(abs(c - 1000) < 4 * math.sqrt(1000 * 2 / 3) for c in counts)  # binomial, 4σ
    with pytest.raises(ConfigError, match="kinks_per_gap"):
        schema(kinks_per_gap=True, kinks_over_data=True)
    with pytest.raises(ConfigError, match="kinks_per_gap"):
        build_model(schema(width=10, kinks_per_gap=True), 2, 1, seed=5, x_train=torch.zeros(4, 2, dtype=torch.float64))
