"""Prop 1 of Jacot et al. 2022: L^r(Z) equals L_λ(W) at W_ℓ = Z_ℓ(Z^σ_{ℓ−1})⁺ and never exceeds L_λ(W)."""

import copy

import pytest
import torch

from repcost.analysis.reformulation import augment, reformulated_loss, representations
from repcost.models.fc import FC, FCConfig
from repcost.objective import objective


def _net(seed, beta=1.0, depth=3, width=12, d_in=4, d_out=3, slope=0.0):
    g = torch.Generator().manual_seed(seed)
    m = FC(FCConfig(depth=depth, width=width, beta=beta, slope=slope), d_in, d_out, g).double()
    with torch.no_grad():
        for b in m.biases:
            b.normal_(generator=g)
    return m, g


def _min_norm_model(model, x, rcond=1e-10):
    """A float64 copy of an `fc` model with W_ℓ ← Z_ℓ (Z^σ_{ℓ−1})⁺ (bias column → b_ℓ), layer by layer.

    The hidden representations and outputs on x are unchanged (the residual W̃_ℓ, orthogonal to
    the data, is dropped), so the copy's objective equals L^r of the original (Prop 1).
    """
    m = copy.deepcopy(model).double()
    beta = float(m.beta)
    zs, _ = representations(model, x)  # the targets Z_ℓ of the original network
    with torch.no_grad():
        h = x.to(torch.float64).T
        for i in range(m.depth):
            s = augment(h, beta)
            w = zs[i] @ torch.linalg.pinv(s, rtol=rcond)  # n_ℓ × (n_{ℓ−1} [+1])
            if beta > 0:
                m.weights[i].copy_(w[:, :-1])
                m.biases[i].copy_(w[:, -1])
            else:
                m.weights[i].copy_(w)
            z = w @ s
            h = m.activation(z) if i < m.depth - 1 else z
    return m


@pytest.mark.parametrize("beta,slope,loss", [(1.0, 0.0, "mse"), (0.0, 0.0, "mse"), (0.5, 0.2, "cross_entropy")])
def test_reformulation_bounds_and_equals_objective(beta, slope, loss):
    for seed in range(4):
        m, g = _net(seed, beta=beta, slope=slope)
        x = torch.randn(7, 4, dtype=torch.float64, generator=g)  # N = 7 < width: W has a residual part
        y = torch.randint(0, 3, (7,), generator=g) if loss == "cross_entropy" else torch.randn(7, 3, dtype=torch.float64, generator=g)
        r = reformulated_loss(m, x, y, lam=0.05, loss=loss)
        obj = float(objective(m, x, y, loss, 0.05, "one")[0].detach())
        assert r["original"] == pytest.approx(obj, rel=1e-12)
        assert r["reformulated"] < r["original"] - 1e-6  # strictly below: random W has W̃ ≠ 0
        mm = _min_norm_model(m, x)
        assert torch.allclose(mm(x), m(x), atol=1e-9)  # same outputs and hidden representations
        for h, hh in zip(m.hidden(x), mm.hidden(x)):
            assert torch.allclose(h.pre, hh.pre, atol=1e-9)
        obj_min = float(objective(mm, x, y, loss, 0.05, "one")[0].detach())
        assert obj_min == pytest.approx(r["reformulated"], rel=1e-9)
        assert reformulated_loss(mm, x, y, lam=0.05, loss=loss)["reformulated"] == pytest.approx(obj_min, rel=1e-9)


def test_terms_are_per_layer_norms_of_min_norm_weights():
    m, g = _net(1)
    x = torch.randn(30, 4, dtype=torch.float64, generator=g)  # N > n_0 + 1: Z^σ_0 has full row rank
    t = reformulated_loss(m, x, m(x).detach(), lam=1.0)["terms"]
    # first layer: the data span all of R^{n_0+1}, so the min-norm W_1 is W_1 itself
    assert float(t[0]) == pytest.approx(float(((m.weights[0] ** 2).sum() + (m.biases[0] ** 2).sum()).detach()), rel=1e-9)
    assert len(t) == m.depth and all(float(v) > 0 for v in t)
