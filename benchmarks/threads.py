"""Steps/s of repcost's training loop with 1, 2, all and `auto` torch threads (repcost.threads).

Three model sizes: the demo (the default config), Jacot et al. 2022's MNIST net (experiment=jacot22-fig1:
fc L = 3, width 50, N = 42) and Jacot 2023's Fig 1 net (experiment=jacot23-fig1: fc L = 10, width 100,
N = 2000); each on an idle machine and beside one competing busy process. In each cell the settings
alternate for `--rounds` rounds (so machine noise hits them alike) and the best round of each counts.
Target: `auto` within 10 % of the best setting in every cell.

    python benchmarks/threads.py [--seconds 0.6] [--rounds 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time

import torch

from repcost import threads
from repcost.config import compose_config, validate
from repcost.data import load_data
from repcost.models import build_model
from repcost.train.engine import Engine

MODELS = {"demo": [], "jacot22 MNIST": ["experiment=jacot22-fig1"], "jacot23 Fig 1": ["experiment=jacot23-fig1"]}


def setup(overrides: list[str]):
    """(spec, data, model) of a config, on the CPU in its training dtype."""
    spec = validate(compose_config([*overrides, "device=cpu", "train.progress=false"]))
    data = load_data(spec.data).to(spec.torch_dtype, "cpu")
    model = build_model(spec.model, data.d_in, data.d_out, spec.seed, data.x_train).to(dtype=spec.torch_dtype)
    return spec, data, model


def steps_per_s(spec, data, model, steps: int) -> float:
    """Steps/s of `steps` steps of the first phase (a fresh trainer on a copy of the model)."""
    cfg = dataclasses.replace(spec.train, phases=[dataclasses.replace(spec.train.phases[0], steps=steps, lam_factor=1.0)],
                              log_every=10**9, progress=False)
    m = build_model(spec.model, data.d_in, data.d_out, spec.seed).to(dtype=spec.torch_dtype)
    m.load_state_dict(model.state_dict())
    tr = Engine([m], data, [cfg], [spec.seed])
    t = time.perf_counter()
    tr.run()
    return steps / (time.perf_counter() - t)


def cell(spec, data, model, settings: dict[str, int | str], seconds: float, rounds: int) -> dict[str, float]:
    """Best steps/s per setting over alternating rounds; `auto` is chosen afresh each round (as a run would)."""
    work = data.x_train.shape[0] * sum(p.numel() for p in model.parameters())
    torch.set_num_threads(1)
    steps = max(5, int(seconds * steps_per_s(spec, data, model, 5)))  # calibrate, and warm up
    best: dict[str, float] = {k: 0.0 for k in settings}
    for _ in range(rounds):
        for name, setting in settings.items():
            n = threads.choose(setting, work)[0]
            torch.set_num_threads(n)
            time.sleep(0.3)  # OpenMP workers of the previous setting spin for up to ~0.2 s before they sleep
            best[name] = max(best[name], steps_per_s(spec, data, model, steps))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=0.6, help="timed seconds per setting and round")
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    os.environ.pop("OMP_NUM_THREADS", None)  # `auto` must decide here (torch has read it already)
    cores = threads.cores_available()
    settings: dict[str, int | str] = {"1": 1, "2": 2, f"all ({cores})": cores, "auto": "auto"}
    if cores <= 2:
        settings.pop("2")
    print(f"{cores} cores; torch {torch.__version__}; load average {os.getloadavg()[0]:.2f} at the start")
    cols = list(settings)
    print(f"{'model':16s} {'load':5s} " + " ".join(f"{c:>9s}" for c in cols) + "   auto/best  threads(auto)")
    worst = 1.0
    for name, overrides in MODELS.items():
        spec, data, model = setup(overrides)
        work = data.x_train.shape[0] * sum(p.numel() for p in model.parameters())
        for load in ("idle", "busy"):
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load == "busy" else None
            try:
                if hog is not None:
                    time.sleep(0.3)
                auto_n = threads.choose("auto", work)
                res = cell(spec, data, model, settings, a.seconds, a.rounds)
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
            ratio = res["auto"] / max(res.values())
            worst = min(worst, ratio)
            print(f"{name:16s} {load:5s} " + " ".join(f"{res[c]:9.1f}" for c in cols) +
                  f"   {ratio:9.2f}  {auto_n[0]} ({auto_n[1]})", flush=True)
    print(f"worst auto/best: {worst:.2f} (target >= 0.90); steps/s, best of {a.rounds} rounds")


if __name__ == "__main__":
    main()
