"""Batched float64 Jacobians against a per-point autograd loop; the Prop 3 Schatten bound (Jacot 2023)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from repcost.analysis.spectra import (
    jacobian_spectra,
    jacobians,
    numerical_rank,
    prop3_bound,
    rank_measures,
    schatten_cost,
)
from repcost.models import MODELS, build_model

FAMILIES = {
    "fc": dict(depth=4, width=9, slope=0.1, beta=1.0),
    "linear_relu": dict(depth=3, width=11, linear_width=6),
    "parallel": dict(depth=3, n_subnets=5, width=4),
}


def model(family, d_in, d_out, seed=0, **kw):
    m = build_model(MODELS.get(family).schema(**{**FAMILIES.get(family, {}), **kw}), d_in, d_out, seed)
    g = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():  # non-zero biases so that they are exercised
        for name, p in m.named_parameters():
            if name.startswith("biases") or name in ("b", "c"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return m


def loop_jacobians(m, x):
    return np.stack([torch.autograd.functional.jacobian(lambda z: m(z.unsqueeze(0))[0], xi).numpy() for xi in x])


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("d_in,d_out", [(2, 5), (5, 3)])  # jacfwd and jacrev paths
def test_jacobians_match_autograd_loop(family, d_in, d_out):
    m = model(family, d_in, d_out)
    x = torch.randn(13, d_in, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    J = jacobians(m, x)
    assert J.shape == (13, d_out, d_in) and J.dtype == np.float64
    np.testing.assert_allclose(J, loop_jacobians(m, x), rtol=0, atol=1e-10)
    np.testing.assert_allclose(jacobians(m, x, chunk_size=4), J, rtol=0, atol=1e-13)
    np.testing.assert_allclose(jacobians(m, x.numpy()), J, rtol=0, atol=0)  # numpy input


def test_jacobian_spectra_and_ranks():
    m = model("fc", 6, 4, depth=3, width=10)
    x = torch.randn(9, 6, dtype=torch.float64)
    s = jacobian_spectra(m, x, chunk_size=2)
    assert s.shape == (9, 4)
    np.testing.assert_allclose(s, np.linalg.svd(jacobians(m, x), compute_uv=False), rtol=1e-12, atol=1e-14)
    ranks = rank_measures(s)
    assert set(ranks) == {"numerical_rank", "stable_rank", "entropy_rank"} and ranks["stable_rank"].shape == (9,)
    assert ranks["numerical_rank"].max() == 4  # Rank_J(f; X) = max_i Rank J f(x_i) (Jacot 2023 Def 1)

    # a rank-2 bottleneck caps the Jacobian rank at 2
    m2 = model("fc", 6, 5, depth=3, width=[8, 2], beta=0.0)
    assert numerical_rank(jacobian_spectra(m2, x)).max() == 2


@pytest.mark.parametrize("L", [2, 3, 4, 5, 6])
def test_prop3_schatten_bound_bias_free(L):
    # Jacot 2023 Prop 3: Σ_k s_k(J f(x))^{2/L} ≤ R(f)/L ≤ (1/L) Σ_ℓ ‖W_ℓ‖²_F at every point.
    for seed in range(3):
        m = model("fc", 4, 3, seed=seed, depth=L, width=[7, 5, 6, 3, 8][: L - 1], beta=0.0, slope=0.0,
                  init_scale=[0.5, 1.0, 2.0][seed])
        x = torch.randn(200, 4, dtype=torch.float64)
        bound = prop3_bound(m)
        assert bound == pytest.approx(sum(float((W.detach() ** 2).sum()) for W in m.weights) / L)
        s = jacobian_spectra(m, x)
        for tol in (0.0, 1e-12):
            c = schatten_cost(s, L, rel_tol=tol)
            assert c.shape == (200,) and np.all(c <= bound * (1 + 1e-12))


def test_prop3_bound_with_biases_and_leaky_slope():
    # biases never enter the bound (|D_ℓ| ≤ 1 in the proof), so it holds for any σ_a and β
    m = model("fc", 5, 5, depth=5, width=6, slope=-0.5, beta=2.0)
    s = jacobian_spectra(m, torch.randn(100, 5, dtype=torch.float64))
    assert np.all(schatten_cost(s, 5) <= prop3_bound(m))


def test_schatten_cost_values():
    assert schatten_cost(np.array([4.0, 1.0, 0.0]), 2) == pytest.approx(5.0)  # nuclear norm at L = 2
    assert schatten_cost(np.array([8.0, 1.0]), 3) == pytest.approx(4.0 + 1.0)
    assert schatten_cost(np.array([1.0, 1e-16]), 10) == pytest.approx(1.0)  # round-off dropped
    assert schatten_cost(np.array([1.0, 1e-16]), 10, rel_tol=0.0) > 1.0005


def test_float32_model_jacobians():
    m = model("fc", 4, 6)
    m32 = copy.deepcopy(m).float()
    x = torch.randn(20, 4, dtype=torch.float64)
    J, J32 = jacobians(m, x), jacobians(m32, x)
    assert J32.dtype == np.float64
    np.testing.assert_allclose(J32, J, rtol=1e-5, atol=1e-5 * np.abs(J).max())
    np.testing.assert_allclose(jacobian_spectra(m32, x), jacobian_spectra(m, x), rtol=1e-5, atol=1e-6)
    assert all(p.dtype == torch.float32 for p in m32.parameters())
