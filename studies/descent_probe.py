"""How far is a finished run from a local minimum of its objective? Continue it with full-batch L-BFGS.

A run whose certificate says "not a critical point" may be slow to converge (a shallow, ill-conditioned
valley that first-order steps cross slowly) or stopped beside a kink. This probe starts from the run's final
parameters, in float64, and minimises the run's own objective (data loss + λ·scale·‖θ‖², phase factor 1)
with torch.optim.LBFGS (strong-Wolfe line search, history 50). Every `--every` iterations it prints the
objective, its relative decrease from the run's end, the certificate (stationarity, Clarke measure) and,
for data with a known rank k (`data.meta["k"]`, e.g. `rank_k`), the middle hidden layers' largest
s_{k+1}/s_k (Jacot 2023 Fig 1's rank verdict; representations centred, post-activation, on the training
inputs as the `spectra` analysis takes them).

The decrease it finds is a lower bound on how far above a local minimum the run ended; whether a rank
verdict survives that descent says whether it is a property of the minimum or of where training stopped.
The probe writes nothing into the run directory.

    python studies/descent_probe.py RUN_DIR [--iters 1000] [--every 200] [--threads 1]
"""

from __future__ import annotations

import sys
import time

import torch

from repcost.analysis.certificate import critical_point_certificate
from repcost.analysis.spectra import hidden_spectra
from repcost.api import load_run
from repcost.errors import OneLineParser, RepcostError
from repcost.train.objective import objective


def middle_max_ratio(model: torch.nn.Module, x: torch.Tensor, k: int) -> float:
    """max over the middle hidden layers (L/4 ≤ ℓ ≤ 3L/4) of s_{k+1}/s_k of the centred representation."""
    L = int(model.depth)
    spectra = hidden_spectra(model, x, centred=True, which="post")
    return max(float(sp.s[k] / sp.s[k - 1]) for sp in spectra if L / 4 <= sp.layer <= 3 * L / 4)


def report(model, x, y, train, k: int | None) -> str:
    c = critical_point_certificate(model, x, y, train.loss, train.lam, train.reg_scale)
    with torch.no_grad():
        obj, dl, sq = (float(v) for v in objective(model, x, y, train.loss, train.lam, train.reg_scale))
    parts = [f"objective {obj:.8g}", f"data loss {dl:.3g}", f"‖θ‖² {sq:.6g}",
             f"stationarity {c['stationarity']:.3g}"]
    if "clarke_stationarity" in c:
        parts.append(f"Clarke {c['clarke_stationarity']:.3g} ({c['kinks']} kinks)")
    if k is not None:
        parts.append(f"middle max s{k + 1}/s{k} {middle_max_ratio(model, x, k):.4f}")
    return ", ".join(parts), obj


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="descent_probe", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--iters", type=int, default=1000, help="L-BFGS iterations in all")
    ap.add_argument("--every", type=int, default=200, help="report every so many iterations")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    if a.iters < 1 or a.every < 1:
        ap.error("--iters and --every must be positive")
    torch.set_num_threads(a.threads)
    try:
        run = load_run(a.run_dir)
        data = run.data()
    except RepcostError as e:
        print(f"descent_probe: {e}", file=sys.stderr)
        return 2
    train = run.spec.train
    model = run.model().double()
    x = data.x_train.double()
    y = data.y_train.double() if data.y_train.is_floating_point() else data.y_train
    k = data.meta.get("k") if hasattr(model, "hidden") else None
    line, start = report(model, x, y, train, k)
    print(f"end of run: {line}", flush=True)
    params = list(model.parameters())
    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=a.every, history_size=50, line_search_fn="strong_wolfe",
                            tolerance_grad=0.0, tolerance_change=0.0)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        obj = objective(model, x, y, train.loss, train.lam, train.reg_scale)[0]
        obj.backward()
        return obj

    t0, done = time.time(), 0
    while done < a.iters:
        opt.step(closure)
        done += a.every
        line, obj = report(model, x, y, train, k)
        print(f"L-BFGS {done}: {line}, decrease {(start - obj) / start:.3%} ({time.time() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
