"""Cost of analysis hooks (analysis=spectra every 1,000 steps) relative to a 5,000-step run.

Setting: Jacot 2023 Fig 1 — fc, L = 10, width 100, R⁵⁰→R⁵⁰, N = 2000, full-batch GD,
float32. On a CPU a 5,000-step run takes tens of minutes, so the script times, in one process,
(a) training steps and (b) one call of the periodic hook, alternating, and reports
overhead = (hooks in a 5,000-step run × hook time) / (5,000 × step time). `--direct` also runs
two short runs (with and without hooks every `--every` steps) and compares their wall times.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from repcost.analysis.hooks import AnalysisRunner
from repcost.config import compose_config, validate
from repcost.data import load_data
from repcost.models import build_model
from repcost.train.engine import Engine

BASE = ["model=fc", "model.depth=10", "model.width=100", "data=rank_k", "data.n_train=2000", "data.n_test=0",
        "train=gd", "train.lam=2e-4", "train.phases.0.lr=0.01", "train.log_every=100", "train.progress=false",
        "dtype=float32", "device=cpu", "analysis=spectra"]


def build(steps: int, every: int):
    """Spec, float32 data, model and an AnalysisRunner for the benchmark setting."""
    spec = validate(compose_config(BASE + [f"train.phases.0.steps={steps}", f"analysis.every={every}"]))
    data = load_data(spec.data).to(torch.float32, "cpu")
    model = build_model(spec.model, data.d_in, data.d_out, seed=0).float()
    return spec, data, model, AnalysisRunner(spec.analysis, model, data, "/tmp/repcost-bench")


def time_steps(steps: int, every: int = 0) -> float:
    """Wall seconds of `steps` training steps, with the periodic hook every `every` steps (0 = none)."""
    spec, data, model, runner = build(steps, every)
    tr = Engine([model], data, [spec.train], [0], on_logs=[lambda r: None],
                hooks=[runner.periodic if every else None], hook_every=every)
    t = time.perf_counter()
    tr.run()
    return time.perf_counter() - t


def time_hook(repeats: int) -> float:
    """Median seconds of one periodic hook call (hidden, weight, Jacobian spectra and balance)."""
    _, _, model, runner = build(1, 1000)
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        runner.periodic(model, 1000)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main() -> None:
    """Print step time, hook time and the projected overhead for a 5,000-step run with hooks every 1,000."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50, help="steps per timing segment")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--direct", action="store_true", help="also time two short runs with/without hooks")
    ap.add_argument("--every", type=int, default=100, help="hook interval of the --direct runs")
    a = ap.parse_args()
    time_steps(5), time_hook(1)  # warm-up
    step_t, hook_t = [], []
    for _ in range(a.rounds):
        step_t.append(time_steps(a.steps) / a.steps)
        hook_t.append(time_hook(3))
    st, ht = min(step_t), min(hook_t)
    n_hooks = 4  # steps 1000, 2000, 3000, 4000 of a 5,000-step run (the final analysis is not periodic)
    print(f"step: {st * 1e3:.1f} ms   hook (hidden+weights+jacobian+balance): {ht * 1e3:.1f} ms")
    print(f"projected overhead of hooks every 1,000 steps on a 5,000-step run: "
          f"{100 * n_hooks * ht / (5000 * st):.3f}% (target < 5%)")
    if a.direct:
        without = time_steps(a.steps * 4)
        with_hooks = time_steps(a.steps * 4, a.every)
        print(f"direct: {a.steps * 4} steps without hooks {without:.1f} s, with hooks every {a.every}: "
              f"{with_hooks:.1f} s ({100 * (with_hooks / without - 1):+.1f}%)")


if __name__ == "__main__":
    main()
