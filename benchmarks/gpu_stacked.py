"""Member-steps/s of stacked λ × seed grids on the Jacot 2022 Fig 2 MNIST net, against JAX in the same process.

Workload: fc ReLU net with biases, L = 3, width 50, 784 inputs, 10 classes, N = 1000,
cross-entropy + λ·‖θ‖², full-batch GD, float32. Inputs are uniform pixels and random labels of
MNIST's shape (the arithmetic is MNIST's; no download needed). K members form a λ × seed grid
(λ from 1e-4 to 1e-2, seeds 0, 1, …) trained by repcost's `Engine` (stacked for K > 1)
with its fast steps, eager for reference, and by JAX's jit + fori_loop over a vmapped step.
Targets: repcost >= 0.3x JAX at every K; stacked K = 8 >= 6x one member run alone (sequential).
Usage: python benchmarks/gpu_stacked.py [--device cuda|cpu] [--k 1 8 64] [--steps 2000] [--no-jax]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from anchors import jax_loop, stacked_params, sync

from repcost.config import compose_config, validate
from repcost.data.bundle import DataBundle
from repcost.models import build_model
from repcost.train.engine import Engine

N, D, C, WIDTH, LR = 1000, 784, 10, 50, 0.05


def grid(K: int) -> list[tuple[int, float]]:
    """(seed, λ) of K members: a λ grid of min(K, 8) values by K / that many seeds."""
    n_lam = min(K, 8)
    lams = [1e-4 * 100 ** (i / max(n_lam - 1, 1)) for i in range(n_lam)]
    return [(k // n_lam, lams[k % n_lam]) for k in range(K)]


def setup(device: str, K: int):
    g = torch.Generator().manual_seed(0)
    data = DataBundle("mnist-shaped", torch.rand(N, D, generator=g), torch.randint(0, C, (N,), generator=g),
                      task="classification", n_classes=C).to(torch.float32, torch.device(device))
    base = ["model=fc", "model.depth=3", f"model.width={WIDTH}", "model.beta=1.0", "model.bias_regularised=true",
            "train.loss=cross_entropy", f"train.phases=[{{optimizer:gd,lr:{LR},steps:100}}]", "train.check_every=10",
            "train.log_every=1000000000", "train.progress=false", "dtype=float32", f"device={device}"]
    specs = [validate(compose_config(base + [f"seed={s}", f"train.lam={lam}"])) for s, lam in grid(K)]
    return data, specs


def repcost_rate(data, specs, steps: int, compiled: bool, graphed: bool) -> tuple[float, float]:
    """(member-steps/s of a timed run, seconds of a first 20-step run: compile and capture included)."""
    def run(n: int) -> float:
        for sp in specs:
            sp.train.phases[0].steps = n
        models = [build_model(sp.model, data.d_in, data.d_out, sp.seed).to(data.x_train.device, torch.float32)
                  for sp in specs]
        if len(specs) == 1:
            t = Engine(models[:1], data, [specs[0].train], [specs[0].seed], compiled=compiled, graphed=graphed)
        else:
            t = Engine(models, data, [sp.train for sp in specs], [sp.seed for sp in specs], compiled=compiled,
                       graphed=graphed)
        sync(specs[0].device)
        t0 = time.perf_counter()
        t.run()
        sync(specs[0].device)
        return time.perf_counter() - t0

    first = run(20)
    return len(specs) * steps / run(steps), first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 8, 64])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    cuda = a.device.startswith("cuda")
    name = torch.cuda.get_device_name() if cuda else f"CPU, {torch.get_num_threads()} threads"
    print(f"Jacot 2022 Fig 2 MNIST net (fc L=3, width {WIDTH}, N={N}, CE), λ × seed grids, full-batch GD, float32, "
          f"{name}", flush=True)
    res: dict = {"device": name, "steps": a.steps, "K": {}}
    for K in a.k:
        data, specs = setup(a.device, K)
        r: dict = {}
        r["repcost_eager"], _ = repcost_rate(data, specs, min(a.steps, 200), False, False)
        r["repcost_fast"], r["first_run_s"] = repcost_rate(data, specs, a.steps, True, cuda)
        if not a.no_jax:
            models = [build_model(sp.model, data.d_in, data.d_out, sp.seed).to(a.device, torch.float32) for sp in specs]
            c = torch.tensor([sp.train.lam for sp in specs], device=a.device, dtype=torch.float32)
            try:
                dt = jax_loop(stacked_params(models), data.x_train, data.y_train, c, LR, "cross_entropy", a.steps)
                if dt is not None:
                    r["jax"] = K * a.steps / dt
            except Exception as e:
                print(f"  K={K}: JAX failed ({type(e).__name__}: {str(e).splitlines()[0][:120]})", flush=True)
        res["K"][K] = r
        line = (f"  K={K:3d}: repcost fast {r['repcost_fast']:9.0f} member-steps/s (eager {r['repcost_eager']:.0f}; "
                f"first 20-step run {r['first_run_s']:.1f} s)")
        if "jax" in r:
            line += f"  JAX {r['jax']:9.0f}  repcost/JAX {r['repcost_fast'] / r['jax']:.2f}x (target >= 0.3x)"
        print(line, flush=True)
    if 1 in res["K"] and 8 in res["K"]:
        print(f"stacked K=8 over one member alone: {res['K'][8]['repcost_fast'] / res['K'][1]['repcost_fast']:.1f}x "
              "(target >= 6x)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
