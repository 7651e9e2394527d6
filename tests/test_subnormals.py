"""train.flush_subnormals: CPU runs set parameter and moment entries below the smallest normal float to 0."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from repcost.config import compose_config, validate
from repcost.data import load_data
from repcost.models import build_model
from repcost.train.engine import Engine
from repcost.train.optim import Optimizer


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_flush_zeroes_exactly_the_active_members_subnormal_entries(dtype):
    tiny = np.finfo(np.float32 if dtype == torch.float32 else np.float64).tiny
    values = np.array([1.0, -2.5, tiny, -tiny, tiny / 3, -tiny / 7, 0.0, -0.0, np.nan, np.inf, 1e-30, tiny * 0.999])
    rng = np.random.default_rng(0)
    W = rng.choice(values, size=(3, 4, 5))  # 3 stacked members
    p = torch.tensor(W, dtype=dtype)
    opt = Optimizer("adam", [p], K=3)
    opt.bufs[0][0].copy_(torch.tensor(rng.choice(values, size=W.shape), dtype=dtype))
    m_before = opt.bufs[0][0].numpy().copy()
    opt.active[1] = False  # a member that already stopped keeps what it stopped with
    opt.flush_subnormals()

    def expected(a):
        a = a.copy()
        small = np.abs(a) < tiny
        small[1] = False
        a[small] = 0.0
        return a

    np.testing.assert_array_equal(p.numpy(), expected(W.astype(p.numpy().dtype)))
    np.testing.assert_array_equal(opt.bufs[0][0].numpy(), expected(m_before))
    assert ((np.abs(p.numpy()[[0, 2]]) < tiny) & (p.numpy()[[0, 2]] != 0)).sum() == 0


def _run(flush: bool, tiny_rows: int = 3):
    spec = validate(compose_config([
        "train.progress=false", "dtype=float32", "model=fc", "model.depth=3", "model.width=8", "model.beta=0",
        "data=teacher",
        "data.n_train=32", "data.n_test=0", "train=gd", "train.phases.0.steps=30", "train.phases.0.lr=0.05",
        "train.check_every=5", f"train.flush_subnormals={str(flush).lower()}"]))
    data = load_data(spec.data).to(torch.float32, torch.device("cpu"))
    m = build_model(spec.model, data.d_in, data.d_out, spec.seed).float()
    with torch.no_grad():  # units weight decay has all but removed (no biases: once zero, they stay zero)
        m.weights[0][:tiny_rows] = 1e-40
        m.weights[1][:, :tiny_rows] = 1e-40
    trainer = Engine([m], data, [spec.train], [spec.seed])
    return m, trainer.run()[0], trainer


def _subnormal_count(m) -> int:
    tiny = torch.finfo(torch.float32).tiny
    return sum(int(((p.abs() > 0) & (p.abs() < tiny)).sum()) for p in m.parameters())


def test_a_cpu_run_ends_without_subnormal_weights_and_with_the_same_fit():
    flushed, r1, t1 = _run(True)
    kept, r2, t2 = _run(False)
    assert _subnormal_count(kept) > 0  # without the flush they stay (so this test can fail)
    assert _subnormal_count(flushed) == 0
    assert r1.steps == r2.steps == 30
    f1, f2 = t1.members[0].evaluate(), t2.members[0].evaluate()
    assert abs(f1["objective"] - f2["objective"]) <= 1e-6 * abs(f2["objective"])

