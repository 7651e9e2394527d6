"""The objective equals data loss + λ·s·Σ‖p‖² computed by hand, for each convention s."""

from __future__ import annotations

import pytest
import torch

from repcost.models import MODELS, build_model
from repcost.objective import data_loss, objective


@pytest.mark.parametrize("reg_scale,s", [("one", 1.0), ("per_depth", 1 / 4), ("half", 0.5)])
@pytest.mark.parametrize("name,kw", [("fc", dict(depth=4, width=5, beta=1.0, bias_regularised=True)),
                                     ("linear_relu", dict(depth=4, width=5)),
                                     ("parallel", dict(depth=4, n_subnets=3, width=2))])
def test_objective_by_hand(reg_scale, s, name, kw):
    m = build_model(MODELS.get(name).schema(**kw), 3, 2, seed=0)
    x, y = torch.randn(9, 3, dtype=torch.float64), torch.randn(9, 2, dtype=torch.float64)
    lam = 0.037
    obj, dl, sq = objective(m, x, y, "mse", lam, reg_scale)
    mse = sum(((m(x)[i] - y[i]) ** 2).sum() for i in range(9)) / 9
    if name == "fc":  # weights and biases
        hand_sq = sum((W ** 2).sum() for W in m.weights) + sum((b ** 2).sum() for b in m.biases)
    elif name == "linear_relu":  # W_i and a; biases b, c free
        hand_sq = sum((W ** 2).sum() for W in m.linear) + (m.a ** 2).sum()
    else:
        hand_sq = sum((W ** 2).sum() for W in m.sub) + (m.alpha ** 2).sum()
    assert torch.allclose(dl, mse)
    assert torch.allclose(sq, hand_sq)
    assert torch.allclose(obj, mse + lam * s * hand_sq)


def test_cross_entropy():
    out = torch.tensor([[2.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    y = torch.tensor([0, 1])
    hand = -(torch.log_softmax(out, 1)[0, 0] + torch.log_softmax(out, 1)[1, 1]) / 2
    assert torch.allclose(data_loss(out, y, "cross_entropy"), hand)
