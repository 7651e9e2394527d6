"""Tight training loops that repcost's engine is measured against (benchmarks/gpu_loop.py, gpu_stacked.py).

Each anchor runs the same full-batch GD on data loss + c·Σ‖p‖² for an fc ReLU net with biases, from
the same initial parameters, and returns seconds for `steps` steps (after its own warm-up):
  eager      a plain PyTorch loop (autograd.grad + foreach update)
  graph      that step captured once in a CUDA graph and replayed
  compiled   the step as one torch.compile'd function (torch.func.grad + update), replayed from a
             CUDA graph on CUDA
  jax        jax.jit of a lax.fori_loop over the steps (where JAX is installed), with vmap over
             stacked members for K > 1
All anchors take stacked parameters (K, …) with a per-member coefficient c (K,).
"""

from __future__ import annotations

import os
import time

import torch

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX beside torch on one GPU


def sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def forward(ws: list[torch.Tensor], bs: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """fc ReLU net, one member: W_L relu(… relu(W_1 x + b_1) …) + b_L (samples are rows)."""
    h = x
    for i, (w, b) in enumerate(zip(ws, bs)):
        h = h @ w.T + b
        if i < len(ws) - 1:
            h = torch.relu(h)
    return h


def member_objective(ws, bs, x, y, c, loss: str):
    out = forward(ws, bs, x)
    dl = ((out - y) ** 2).sum() / out.shape[0] if loss == "mse" else torch.nn.functional.cross_entropy(out, y)
    return dl + c * sum((p * p).sum() for p in [*ws, *bs])


def stacked_objective(params: list[torch.Tensor], x, y, c, loss: str):
    """Σ_members objective_k for stacked params [W_1 … W_L, b_1 … b_L] with a leading member axis."""
    L = len(params) // 2

    def one(ps, ck):
        return member_objective(ps[:L], ps[L:], x, y, ck, loss)

    return torch.func.vmap(one)(params, c).sum()


def eager_loop(params, x, y, c, lr, loss, steps):
    ps = [p.clone().requires_grad_() for p in params]

    def step():
        g = torch.autograd.grad(stacked_objective(ps, x, y, c, loss), ps)
        with torch.no_grad():
            torch._foreach_add_(ps, g, alpha=-lr)

    return _timed(step, steps, x.device)


def graph_loop(params, x, y, c, lr, loss, steps, compiled: bool = False):
    """The step as a CUDA graph (compiled: the step is one torch.compile'd function first); eager call on CPU."""
    ps = [p.clone() for p in params]

    def update(ps):
        g = torch.func.grad(lambda q: stacked_objective(q, x, y, c, loss))(ps)
        for p, gi in zip(ps, g):
            p.sub_(lr * gi)

    fn = torch.compile(update) if compiled else update
    if x.device.type != "cuda":
        return _timed(lambda: fn(ps), steps, x.device)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(ps)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(ps)
    return _timed(g.replay, steps, x.device)


def _timed(step, steps: int, device) -> float:
    for _ in range(3):
        step()
    sync(device)
    t = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    return time.perf_counter() - t


def jax_loop(params, x, y, c, lr, loss, steps, precision: str = "highest") -> float | None:
    """JAX: jit(fori_loop(steps)) of the vmapped step; None where JAX is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_default_matmul_precision", precision)
    dev = jax.devices("gpu")[0] if x.device.type == "cuda" and jax.default_backend() == "gpu" else jax.devices("cpu")[0]
    put = lambda t: jax.device_put(jnp.asarray(t.detach().cpu().numpy()), dev)  # noqa: E731
    P, X, Y, C = [put(p) for p in params], put(x), put(y), put(c)
    L = len(P) // 2

    def obj(ps, ck):
        h = X
        for i in range(L):
            h = h @ ps[i].T + ps[L + i]
            if i < L - 1:
                h = jax.nn.relu(h)
        if loss == "mse":
            dl = ((h - Y) ** 2).sum() / h.shape[0]
        else:
            dl = -jnp.take_along_axis(jax.nn.log_softmax(h), Y[:, None], 1).mean()
        return dl + ck * sum((p * p).sum() for p in ps)

    def step(_, ps):
        g = jax.vmap(jax.grad(obj))(ps, C)
        return [p - lr * gi for p, gi in zip(ps, g)]

    run = jax.jit(lambda ps: jax.lax.fori_loop(0, steps, step, ps))
    jax.block_until_ready(run(P))  # compile + one pass
    t = time.perf_counter()
    jax.block_until_ready(run(P))
    return time.perf_counter() - t


def stacked_params(models) -> list[torch.Tensor]:
    """[W_1 … W_L, b_1 … b_L] of K repcost fc models stacked along a new member axis."""
    ws = [torch.stack([m.weights[i].detach() for m in models]) for i in range(models[0].depth)]
    bs = [torch.stack([m.biases[i].detach() for m in models]) for i in range(models[0].depth)]
    return ws + bs
