"""repcost's training loop against a hand-written tight PyTorch loop of the same arithmetic.

Setting: Jacot 2023 Fig 1 — fc, L = 10, width 100, rank-5 task R⁵⁰→R⁵⁰, N = 2000,
full-batch GD, float32, metrics logged every 100 steps. The two loops alternate in rounds in
one process (so machine noise hits both) and the script prints steps/s of each and the ratio.
Target: repcost >= 0.95x the tight loop.
"""

from __future__ import annotations

import argparse
import time

import torch

from repcost.config import compose_config, validate
from repcost.data import load_data
from repcost.models import build_model
from repcost.train.engine import Engine

OVERRIDES = ["model=fc", "model.depth=10", "model.width=100", "model.beta=1.0", "data=rank_k",
             "data.n_train=2000", "data.n_test=0", "train=gd", "train.lam=2e-4", "train.reg_scale=per_depth",
             "train.phases.0.lr=0.01", "train.log_every=100", "train.progress=false", "dtype=float32",
             "device=cpu"]


def setup(steps: int):
    """Validated spec, float32 data and a fresh model for one timed segment."""
    spec = validate(compose_config(OVERRIDES + [f"train.phases.0.steps={steps}"]))
    data = load_data(spec.data).to(torch.float32, "cpu")
    model = build_model(spec.model, data.d_in, data.d_out, seed=0).float()
    return spec, data, model


def time_repcost(steps: int) -> float:
    """Seconds for `steps` steps of repcost's Engine (logging to an in-memory list)."""
    spec, data, model = setup(steps)
    logs = []
    tr = Engine([model], data, [spec.train], [0], on_logs=[logs.append])
    t = time.perf_counter()
    tr.run()
    return time.perf_counter() - t


def time_tight(steps: int) -> float:
    """Seconds for `steps` steps of a hand-written loop: same net, objective, GD and logging."""
    spec, data, model = setup(steps)
    Ws = [w.detach().clone().requires_grad_() for w in model.weights]
    bs = [b.detach().clone().requires_grad_() for b in model.biases]
    x, y = data.x_train, data.y_train
    lr, coef, n, L = spec.train.phases[0].lr, spec.train.lam / 10, x.shape[0], 10
    params = Ws + bs
    logs = []
    t = time.perf_counter()
    for step in range(steps):
        h = x
        for i in range(L - 1):
            h = torch.relu(h @ Ws[i].T + bs[i])
        out = h @ Ws[-1].T + bs[-1]
        dl = ((out - y) ** 2).sum() / n
        sq = sum((p * p).sum() for p in params)
        obj = dl + coef * sq
        for p in params:
            p.grad = None
        obj.backward()
        if step % 100 == 0:
            logs.append((step, obj.item(), dl.item(), sq.item()))
        with torch.no_grad():
            for p in params:
                p.sub_(lr * p.grad)
    return time.perf_counter() - t


def main() -> None:
    """Alternate repcost and the tight loop for several rounds; print steps/s and the ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100, help="steps per timed segment")
    ap.add_argument("--rounds", type=int, default=8, help="alternating rounds")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = leave as is)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    time_repcost(20), time_tight(20)  # warm-up
    rc, tt = [], []
    for r in range(a.rounds):
        rc.append(time_repcost(a.steps))
        tt.append(time_tight(a.steps))
        print(f"round {r}: repcost {a.steps / rc[-1]:.2f} steps/s, tight {a.steps / tt[-1]:.2f} steps/s", flush=True)
    r_sps, t_sps = a.steps / min(rc), a.steps / min(tt)
    ratios = sorted(t / r for r, t in zip(rc, tt))  # per round: repcost steps/s over tight steps/s
    print(f"repcost loop: {r_sps:.2f} steps/s (best of {a.rounds})")
    print(f"tight loop:   {t_sps:.2f} steps/s (best of {a.rounds})")
    print(f"ratio repcost/tight: best-of-each {r_sps / t_sps:.3f}, per-round median "
          f"{ratios[len(ratios) // 2]:.3f} (min {ratios[0]:.3f}, max {ratios[-1]:.3f}) (target >= 0.95)")


if __name__ == "__main__":
    main()
