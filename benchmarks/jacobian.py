"""Benchmark: batched Jacobian spectra (torch.func vmap) against a per-point autograd loop.

The Jacot 2023 Fig 1C setting: an fc net of depth L = 10, width 100, R⁵⁰ → R⁵⁰, at 2,000 points.
Both methods run in the same process on the same model and points, in float64; the loop is
torch.autograd.functional.jacobian at one point at a time, then an SVD per point. The two
spectra are checked to agree before any time is reported.

    python benchmarks/jacobian.py                      # full loop over all points
    python benchmarks/jacobian.py --loop-points 200    # loop timed on 200 points, extrapolated
    python benchmarks/jacobian.py --threads 1          # on a busy shared CPU
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from repcost.analysis.spectra import jacobian_spectra
from repcost.models import MODELS, build_model


def loop_spectra(model, x: torch.Tensor) -> np.ndarray:
    """Per-point baseline: autograd.functional.jacobian at each row, then its singular values."""
    f = lambda z: model(z.unsqueeze(0))[0]  # noqa: E731
    return np.stack([np.linalg.svd(torch.autograd.functional.jacobian(f, xi).numpy(), compute_uv=False)
                     for xi in x])


def timed(fn, repeats: int):
    """(result of the last call, list of wall times in seconds)."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, times


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-points", type=int, default=2000, help="points at which to take Jacobians")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats of the batched method (median reported)")
    ap.add_argument("--loop-repeats", type=int, default=1, help="timed repeats of the per-point loop")
    ap.add_argument("--loop-points", type=int, default=None,
                    help="time the loop on this many points only and extrapolate linearly (printed as such); "
                         "default: all --n-points")
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--width", type=int, default=100)
    ap.add_argument("--dim", type=int, default=50, help="d_in = d_out")
    ap.add_argument("--chunk-size", type=int, default=None, help="batched chunk (default: the ~1 GB heuristic)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads for both methods (default: torch's own choice); on a "
                         "shared, oversubscribed CPU, 1 avoids OpenMP spin-wait slowdowns")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    model = build_model(MODELS.get("fc").schema(depth=args.depth, width=args.width), args.dim, args.dim, args.seed)
    model = model.to(args.device)
    x = torch.randn(args.n_points, args.dim, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(args.seed + 1)).to(args.device)
    print(f"fc L={args.depth} width={args.width} R^{args.dim}->R^{args.dim}, N={args.n_points}, "
          f"device={args.device}, torch {torch.__version__}, threads={torch.get_num_threads()}")

    jacobian_spectra(model, x[:8])  # warm-up (torch.func first-call overheads)
    s_batched, t_batched = timed(lambda: jacobian_spectra(model, x, args.chunk_size), args.repeats)
    tb = statistics.median(t_batched)
    print(f"batched jacobian_spectra: median {tb:.3f} s over {args.repeats} repeats "
          f"({', '.join(f'{t:.3f}' for t in t_batched)})")

    n_loop = min(args.loop_points or args.n_points, args.n_points)
    xl = x[:n_loop].cpu()
    model_cpu = model.cpu() if args.device != "cpu" else model
    s_loop, t_loop = timed(lambda: loop_spectra(model_cpu, xl), args.loop_repeats)
    tl_measured = statistics.median(t_loop)
    err = float(np.max(np.abs(s_loop - s_batched[:n_loop])) / np.max(np.abs(s_loop)))
    if err > 1e-10:
        raise SystemExit(f"batched and loop spectra disagree: max relative difference {err:.3e}")
    if n_loop < args.n_points:
        tl = tl_measured * args.n_points / n_loop
        print(f"per-point loop:          {tl_measured:.3f} s measured on {n_loop} points -> "
              f"EXTRAPOLATED to {tl:.3f} s for {args.n_points} points (linear in N)")
    else:
        tl = tl_measured
        print(f"per-point loop:          {tl:.3f} s measured on all {n_loop} points")
    ratio = tl / tb
    print(f"speed-up (loop / batched): {ratio:.1f}x   [target >= 20x]   max rel. spectrum difference {err:.1e}")
    return {"batched_s": tb, "loop_s": tl, "ratio": ratio, "extrapolated": n_loop < args.n_points}


if __name__ == "__main__":
    main()
