"""Attraction / repulsion gradients (Jacot et al. 2022 §3.1) against finite differences and exact pinv."""

import torch

from repcost.analysis.reformulation import (augment, layer_forces, project_points_and_forces, representations,
                                            ridge_pinv)
from repcost.models.fc import FC, FCConfig


def _fd(f, z, eps=1e-6):
    g = torch.zeros_like(z)
    for idx in [(0, 0), (1, 2), (2, 1), (z.shape[0] - 1, z.shape[1] - 1)]:
        e = torch.zeros_like(z)
        e[idx] = eps
        g[idx] = (f(z + e) - f(z - e)) / (2 * eps)
    return g


def test_ridge_pinv_tends_to_pinv():
    g = torch.Generator().manual_seed(0)
    for shape in [(3, 8), (8, 3)]:
        m = torch.randn(*shape, dtype=torch.float64, generator=g)
        assert torch.allclose(ridge_pinv(m, 1e-12), torch.linalg.pinv(m), atol=1e-8)
        assert not torch.allclose(ridge_pinv(m, 1.0), torch.linalg.pinv(m), atol=1e-3)


def test_forces_are_the_negative_gradients_of_the_two_terms():
    """layer_forces: −∂A/∂Z_ℓ and −∂R/∂Z_ℓ against finite differences, A = ‖Z_ℓ(Z^σ_{ℓ−1})⁺_ρ‖², R = ‖Z_{ℓ+1}(Z^σ_ℓ)⁺_ρ‖²."""
    g = torch.Generator().manual_seed(1)
    m = FC(FCConfig(depth=3, width=5, beta=1.0), 4, 3, g).double()
    x = torch.randn(9, 4, dtype=torch.float64, generator=g)
    ridge = 1e-3
    zs, zsig = representations(m, x)
    f = layer_forces(m, x, ridge=ridge)[0]
    z = zs[0].detach()
    fa = lambda zz: float((zz @ ridge_pinv(zsig[0], ridge)).pow(2).sum())
    mask = _fd(fa, z) != 0
    assert torch.allclose(-f["attraction"][mask], _fd(fa, z)[mask], rtol=1e-5, atol=1e-7)
    fr = lambda zz: float((zs[1].detach() @ ridge_pinv(augment(torch.relu(zz), 1.0), ridge)).pow(2).sum())
    assert torch.allclose(-f["repulsion"][mask], _fd(fr, z)[mask], rtol=1e-4, atol=1e-6)
    # attraction pulls towards the origin: the force has negative inner product with Z
    assert float((f["attraction"] * z).sum()) < 0


def test_layer_forces_shapes_and_projection_keeps_rays():
    g = torch.Generator().manual_seed(2)
    m = FC(FCConfig(depth=3, width=6, beta=1.0), 3, 2, g).double()
    x = torch.randn(10, 3, dtype=torch.float64, generator=g)
    fs = layer_forces(m, x, ridge=1e-4)
    assert len(fs) == 2 and all(f["attraction"].shape == (6, 10) == f["repulsion"].shape for f in fs)
    # duplicate a neuron direction with scale 3: the projected neuron points stay on one ray
    z = fs[0]["Z"].clone()
    z[1] = 3.0 * z[0]
    p = project_points_and_forces({**fs[0], "Z": z}, "neurons")
    assert abs(p["points"][1, 0] * p["points"][0, 1] - p["points"][1, 1] * p["points"][0, 0]) < 1e-9
    assert p["points"].shape == p["attraction"].shape == (6, 2)
