"""Balancedness (Jacot 2023 Prop 12 / Remark 6; deep linear nets): zero on hand-built balanced nets,
non-zero after a function-preserving rescale of one unit."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from repcost.analysis.critical import (
    balance_summary,
    layer_balance,
    linear_layer_balance,
    neuron_balance,
    relative_gap,
)
from repcost.models import MODELS, build_model

TOL = 1e-12


def model(family, d_in, d_out, seed=0, **kw):
    return build_model(MODELS.get(family).schema(**kw), d_in, d_out, seed)


def orthogonal(n, seed):
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def set_(p, arr):
    with torch.no_grad():
        p.copy_(torch.as_tensor(np.asarray(arr), dtype=p.dtype))


def rescale_unit(W_in, W_out, i, c, b=None):
    """Incoming row i (and its bias) × c, outgoing column i ÷ c: f is unchanged for c > 0."""
    with torch.no_grad():
        W_in[i] *= c
        W_out[:, i] /= c
        if b is not None:
            b[i] *= c


def all_gaps(m):
    return [b.gap for b in layer_balance(m)] + [g for b in neuron_balance(m) for g in b.gap]


def assert_unbalanced_same_function(m, m2, x):
    torch.testing.assert_close(m2(x), m(x), rtol=1e-12, atol=1e-12)
    assert max(np.max(b.gap) for b in neuron_balance(m2)) > 0.1


def test_relative_gap():
    assert relative_gap(2.0, 1.0) == 0.5 and relative_gap(0.0, 0.0) == 0.0
    np.testing.assert_allclose(relative_gap([1.0, 0.0], [1.0, 3.0]), [0.0, 1.0])


def test_fc_orthogonal_equal_scale_is_balanced():
    n, L, c = 6, 4, 1.7
    m = model("fc", n, n, depth=L, width=n, beta=0.0)
    for ell, W in enumerate(m.weights):
        set_(W, c * orthogonal(n, ell))
    assert max(all_gaps(m)) < TOL
    lb = layer_balance(m)
    assert [b.layer for b in lb] == [1, 2, 3] and lb[0].u == pytest.approx(c**2 * n)
    s = balance_summary(m)
    assert s["layer_gap_max"] < TOL and s["neuron_gap_max"] < TOL

    m2 = copy.deepcopy(m)
    rescale_unit(m2.weights[1], m2.weights[2], i=3, c=2.0)
    x = torch.randn(30, n, dtype=torch.float64)
    assert_unbalanced_same_function(m, m2, x)
    assert layer_balance(m2)[1].gap > 0.01
    nb = neuron_balance(m2)[1]
    assert nb.gap[3] == pytest.approx(relative_gap(4 * c**2, c**2 / 4)) and np.all(np.delete(nb.gap, 3) < TOL)
    assert balance_summary(m2)["neuron_gap_max"] == pytest.approx(nb.gap[3])


@pytest.mark.parametrize("beta", [1.0, 3.0])
def test_fc_regularised_bias_enters_incoming(beta):
    # unit i balanced iff ‖W_1[i,:]‖² + b_1[i]² = ‖W_2[:,i]‖² (stored b: β does not enter)
    d, n, rng = 3, 5, np.random.default_rng(0)
    m = model("fc", d, 2, depth=2, width=n, beta=beta, slope=0.3)
    W1, b1 = rng.standard_normal((n, d)), rng.standard_normal(n)
    dirs = rng.standard_normal((2, n))
    W2 = dirs / np.linalg.norm(dirs, axis=0) * np.sqrt(np.sum(W1**2, axis=1) + b1**2)
    set_(m.weights[0], W1), set_(m.biases[0], b1), set_(m.weights[1], W2), set_(m.biases[1], rng.standard_normal(2))
    assert max(all_gaps(m)) < TOL  # Prop 12: ‖W_1‖² + ‖b_1‖² = ‖W_2‖² (b_2 does not enter)

    m_free = copy.deepcopy(m)
    m_free.structure = dataclasses.replace(m.structure, biases="free")  # then only weights are compared: unbalanced
    assert neuron_balance(m_free)[0].gap.max() > 0.01 and layer_balance(m_free)[0].gap > 0.01

    m2 = copy.deepcopy(m)
    rescale_unit(m2.weights[0], m2.weights[1], i=2, c=0.5, b=m2.biases[0])
    assert_unbalanced_same_function(m, m2, torch.randn(40, d, dtype=torch.float64))


def test_two_layer_relu_a_equals_w_norm():
    # linear_relu, L = 2: |a_k| = ‖w_k‖ (Savarese's balanced 2-layer net)
    d, K, rng = 3, 7, np.random.default_rng(1)
    m = model("linear_relu", d, 1, depth=2, width=K)
    W = rng.standard_normal((K, d))
    set_(m.linear[0], W), set_(m.a, (np.sign(rng.standard_normal(K)) * np.linalg.norm(W, axis=1))[None])
    set_(m.b, rng.standard_normal(K))
    assert max(all_gaps(m)) < TOL
    lin = linear_layer_balance(m)
    assert len(lin) == 1 and lin[0].diag_only and lin[0].gap < TOL
    assert balance_summary(m)["linear_gap_max"] < TOL

    m2 = copy.deepcopy(m)
    rescale_unit(m2.linear[0], m2.a, i=4, c=3.0, b=m2.b)
    assert_unbalanced_same_function(m, m2, torch.randn(40, d, dtype=torch.float64))
    assert linear_layer_balance(m2)[0].gap > 0.01


def test_linear_relu_deep_balanced_by_construction():
    # W_1 = V₁ S Vᵀ, W_2 = U S V₁ᵀ ⇒ W_1W_1ᵀ = W_2ᵀW_2; a[:, k] with ‖a[:, k]‖² = ‖W_2[k, :]‖²
    d, rng = 4, np.random.default_rng(2)
    m = model("linear_relu", d, 2, depth=3, width=d, linear_width=d)
    U, V1, V = orthogonal(d, 1), orthogonal(d, 2), orthogonal(d, 3)
    S = np.diag([2.0, 1.5, 0.7, 0.3])
    W1, W2 = V1 @ S @ V.T, U @ S @ V1.T
    dirs = rng.standard_normal((2, d))
    a = dirs / np.linalg.norm(dirs, axis=0) * np.linalg.norm(W2, axis=1)
    set_(m.linear[0], W1), set_(m.linear[1], W2), set_(m.a, a), set_(m.b, rng.standard_normal(d))
    lin = linear_layer_balance(m)
    assert [(b.layer, b.diag_only) for b in lin] == [(1, False), (2, True)]
    assert max(b.gap for b in lin) < TOL and max(all_gaps(m)) < TOL
    assert [nb.layer for nb in neuron_balance(m)] == [2]  # only the ReLU layer's units

    # G-rescaling between the linear layers keeps f and unbalances the full-matrix condition only
    m2 = copy.deepcopy(m)
    G = np.eye(d) + 0.3 * rng.standard_normal((d, d))
    set_(m2.linear[0], G @ W1), set_(m2.linear[1], W2 @ np.linalg.inv(G))
    x = torch.randn(30, d, dtype=torch.float64)
    torch.testing.assert_close(m2(x), m(x), rtol=1e-10, atol=1e-10)
    assert linear_layer_balance(m2)[0].gap > 0.01

    m3 = copy.deepcopy(m)
    rescale_unit(m3.linear[1], m3.a, i=1, c=2.5, b=m3.b)
    assert_unbalanced_same_function(m, m3, x)
    assert linear_layer_balance(m3)[1].gap > 0.01 and linear_layer_balance(m3)[0].gap > 0.01


def test_parallel_balanced_subnetworks():
    d, k, w, rng = 3, 4, 5, np.random.default_rng(3)
    m = model("parallel", d, 1, depth=3, n_subnets=k, width=w)
    W1 = rng.standard_normal((k, w, d))
    W2 = np.abs(rng.standard_normal((k, 1, w)))
    W2 = W2 / np.linalg.norm(W2, axis=1, keepdims=True) * np.linalg.norm(W1, axis=2)[:, None, :]
    alpha = np.sign(rng.standard_normal(k)) * np.linalg.norm(W2, axis=(1, 2))
    set_(m.sub[0], W1), set_(m.sub[1], W2), set_(m.alpha, alpha[None])
    nb = neuron_balance(m)
    assert [b.u.shape for b in nb] == [(k * w,), (k,)]
    assert max(all_gaps(m)) < TOL
    s = balance_summary(m)
    assert s["subnet_gap_max"] < TOL and s["neuron_gap_max"] < TOL

    m2 = copy.deepcopy(m)
    with torch.no_grad():  # unit j = 2 of sub-network i = 1: entry i·w + j
        m2.sub[0][1, 2] *= 3.0
        m2.sub[1][1, :, 2] /= 3.0
    assert_unbalanced_same_function(m, m2, torch.randn(30, d, dtype=torch.float64))
    g = neuron_balance(m2)[0].gap
    assert g[1 * w + 2] > 0.1 and np.all(np.delete(g, 1 * w + 2) < TOL)
    assert balance_summary(m2)["subnet_gap_max"] > 0.01


def test_linear_layer_balance_is_empty_without_linear_layers():
    """Families whose layers are all joined by ReLUs have no deep-linear balancedness (their linear_pairs are [])."""
    assert linear_layer_balance(model("fc", 2, 2, depth=2, width=3)) == []
    assert "linear_gap_max" not in balance_summary(model("fc", 2, 2, depth=3, width=3))


def test_float32_model_balance():
    m = model("fc", 4, 3, depth=4, width=6)
    m32 = copy.deepcopy(m).float()
    for a, b in zip(layer_balance(m), layer_balance(m32)):
        assert b.u == pytest.approx(a.u, rel=1e-5) and b.gap == pytest.approx(a.gap, abs=1e-5)
    for a, b in zip(neuron_balance(m), neuron_balance(m32)):
        assert b.gap.dtype == np.float64
        np.testing.assert_allclose(b.gap, a.gap, atol=1e-5)
    s, s32 = balance_summary(m), balance_summary(m32)
    assert s.keys() == s32.keys() and all(abs(s[k] - s32[k]) < 1e-5 for k in s)
