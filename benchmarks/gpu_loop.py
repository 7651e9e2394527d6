"""Steps/s of full-batch GD on the Jacot 2023 Fig 1 net: repcost against tight loops in the same process.

Workload: fc ReLU net with biases, L = 10, width 100, d_in = d_out = 50, N = 2000,
MSE + (λ/L)·‖θ‖², λ = 2e-4, float32, lr 1e-4. repcost runs its `Engine` (check every 10 steps, no
metrics lines) eager and with its fast steps (train.compile/train.cuda_graphs: compiled, and on
CUDA replayed from CUDA graphs); the anchors (benchmarks/anchors.py) are an eager loop, the step
in a CUDA graph, the compiled step in a CUDA graph and JAX's jit + fori_loop where JAX is
installed. Compile time is reported separately (the first run of a fresh process pays it).
Targets: CUDA repcost >= 0.6x JAX; CPU compiled repcost >= 0.9x JAX's CPU loop.
Usage: python benchmarks/gpu_loop.py [--device cuda|cpu] [--steps 2000] [--no-jax]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from anchors import eager_loop, graph_loop, jax_loop, stacked_params, sync

from repcost.config import compose_config, validate
from repcost.data.bundle import DataBundle
from repcost.models import build_model
from repcost.train.engine import Engine

LAM, LR, DEPTH, WIDTH, D, N = 2e-4, 1e-4, 10, 100, 50, 2000


def workload(device: str):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=g)
    y = torch.relu(x @ torch.randn(D, 5, generator=g)) @ torch.randn(5, D, generator=g) / 3
    data = DataBundle("fig1-like", x, y).to(torch.float32, torch.device(device))
    spec = validate(compose_config([
        "model=fc", f"model.depth={DEPTH}", f"model.width={WIDTH}", "model.slope=0.0", "model.beta=1.0",
        "model.bias_regularised=true", "model.init_scale=0.5", f"train.lam={LAM}", "train.reg_scale=per_depth",
        f"train.phases=[{{optimizer:gd,lr:{LR},steps:100}}]", "train.check_every=10", "train.log_every=1000000000",
        "train.progress=false", "dtype=float32", f"device={device}"]))
    return data, spec


def repcost_rate(data, spec, steps: int, compiled: bool, graphed: bool) -> tuple[float, float]:
    """(steps/s of a timed run, seconds of the first short run: compile and capture included)."""
    def run(n: int) -> float:
        spec.train.phases[0].steps = n
        m = build_model(spec.model, data.d_in, data.d_out, 0).to(data.x_train.device, torch.float32)
        t = Engine([m], data, [spec.train], [0], compiled=compiled, graphed=graphed)
        sync(spec.device)
        t0 = time.perf_counter()
        t.run()
        sync(spec.device)
        return time.perf_counter() - t0

    first = run(20)
    return steps / run(steps), first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--json", default=None, help="also write the numbers here")
    a = ap.parse_args()
    cuda = a.device.startswith("cuda")
    data, spec = workload(a.device)
    name = torch.cuda.get_device_name() if cuda else f"CPU, {torch.get_num_threads()} threads"
    print(f"Jacot 2023 Fig 1 net (fc L={DEPTH}, width {WIDTH}, N={N}), full-batch GD, float32, {name}", flush=True)
    res: dict = {"device": name, "steps": a.steps}
    rate, _ = repcost_rate(data, spec, min(a.steps, 300 if cuda else 100), False, False)
    res["repcost_eager"] = rate
    print(f"  repcost eager:                 {rate:9.0f} steps/s", flush=True)
    rate, first = repcost_rate(data, spec, a.steps, True, cuda)
    res["repcost_fast"], res["repcost_fast_first_run_s"] = rate, first
    print(f"  repcost {'compiled+graphed' if cuda else 'compiled'}:     {rate:9.0f} steps/s "
          f"(first 20-step run {first:.1f} s: compile{' and capture' if cuda else ''})", flush=True)
    m = build_model(spec.model, data.d_in, data.d_out, 0).to(data.x_train.device, torch.float32)
    params = stacked_params([m])
    c = torch.full((1,), LAM / DEPTH, device=a.device)
    x, y = data.x_train, data.y_train
    n_anchor = min(a.steps, 300) if not cuda else a.steps
    anchors = {"eager": lambda: eager_loop(params, x, y, c, LR, "mse", n_anchor)}
    if cuda:
        anchors["graph"] = lambda: graph_loop(params, x, y, c, LR, "mse", n_anchor)
    anchors["compiled" + ("+graph" if cuda else "")] = lambda: graph_loop(params, x, y, c, LR, "mse", n_anchor, True)
    if not a.no_jax:
        anchors["jax"] = lambda: jax_loop(params, x, y, c, LR, "mse", n_anchor)
        if cuda:
            anchors["jax_default_precision"] = lambda: jax_loop(params, x, y, c, LR, "mse", n_anchor, "default")
    for k, f in anchors.items():
        try:
            dt = f()
        except Exception as e:  # an anchor that cannot run here is reported, not fatal
            print(f"  anchor {k}: failed ({type(e).__name__}: {str(e).splitlines()[0][:120]})", flush=True)
            continue
        if dt is None:
            print(f"  anchor {k}: not installed", flush=True)
            continue
        res[f"anchor_{k}"] = n_anchor / dt
        print(f"  anchor {k:22s} {n_anchor / dt:9.0f} steps/s", flush=True)
    if "anchor_jax" in res:
        print(f"repcost / JAX (highest precision): {res['repcost_fast'] / res['anchor_jax']:.2f}x "
              f"(target >= {0.6 if cuda else 0.9}x)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
