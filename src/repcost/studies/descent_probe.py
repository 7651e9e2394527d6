"""How far is a finished run from a local minimum of its objective? Continue it with full-batch L-BFGS.

A run whose certificate says "not a critical point" may sit at a nonsmooth local minimum (pre-activations
on ReLU kinks, where the gradient need not vanish) or in a shallow, ill-conditioned valley that
first-order steps cross slowly. This probe runs `repcost.analysis.critical.lbfgs_descent` (full-batch
L-BFGS, strong-Wolfe line search, float64, on a copy) on the run's own objective (phase factor 1) from its
final parameters. Every `--every` objective evaluations it prints the objective, its relative decrease
from the run's end, the certificate (stationarity, Clarke measure) and, for data with a known rank k
(`data.meta["k"]`, e.g. `rank_k`), the middle hidden layers' largest s_{k+1}/s_k (Jacot 2023 Fig 1's rank
verdict; representations centred, post-activation, on the training inputs as the `spectra` analysis
takes them) and, for a layered net, the Prop 12 gap (Jacot 2023).

The decrease is a lower bound on how far above a local minimum the run ended; whether a rank verdict
survives the descent says whether it is a property of the minimum or of where training stopped. The
probe writes nothing into the run directory.

    python -m repcost.studies.descent_probe RUN_DIR [--evals 1000] [--every 250] [--threads 1]
"""

from __future__ import annotations

import sys
import time

import torch

from repcost.analysis.arrays import float64_inputs
from repcost.analysis.critical import critical_point_certificate, layer_balance, lbfgs_descent
from repcost.analysis.spectra import hidden_spectra
from repcost.api import load_run
from repcost.config.messages import clean_exit
from repcost.errors import OneLineParser
from repcost.figures.jacot23_fig1 import ratio
from repcost.objective import objective, training_targets


def describe(model, x, y, train, k: int | None) -> tuple[float, str]:
    """The objective at the model's parameters, and a line of its terms, the certificate and `claims`."""
    c = critical_point_certificate(model, x, y, train.loss, train.lam, train.reg_scale)
    with torch.no_grad():
        obj, dl, sq = (float(v) for v in objective(model, x, y, train.loss, train.lam, train.reg_scale))
    parts = [f"objective {obj:.8g}", f"data loss {dl:.3g}", f"‖θ‖² {sq:.6g}", f"stationarity {c['stationarity']:.3g}"]
    if "clarke_stationarity" in c:
        parts.append(f"Clarke {c['clarke_stationarity']:.3g} ({c['kinks']} kinks)")
    return obj, ", ".join(parts + claims(model, x, k))


def claims(model, x, k: int | None) -> list[str]:
    """Jacot 2023's terms at the model's parameters: (rank-k data) the middle hidden layers' (L/4 ≤ ℓ ≤ 3L/4) largest
    s_{k+1}/s_k, centred representations, and (a layered net) the Prop 12 gap, largest over the layer pairs."""
    L, spectra = int(model.depth), hidden_spectra(model, x, centred=True, which="post") if k is not None else []
    worst = [ratio(sp["s"], k) for sp in spectra if L / 4 <= sp["layer"] <= 3 * L / 4]
    return ([f"middle max s{k + 1}/s{k} {max(worst):.4f}"] if worst else []) + (
        [f"Prop 12 gap {max(b.gap for b in layer_balance(model)):.3g}"] if model.structure.layer_rescaling else [])


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="descent_probe", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--evals", type=int, default=1000, help="objective evaluations of L-BFGS in all")
    ap.add_argument("--every", type=int, default=250, help="report every so many evaluations")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    if a.evals < 1 or a.every < 1:
        ap.error("--evals and --every must be positive")
    torch.set_num_threads(a.threads)
    with clean_exit("descent_probe"):  # not a run, an unreadable checkpoint: one line
        run = load_run(a.run_dir)
        data = run.data()
        train, model = run.spec.train, run.model(data=data)  # float64
    # the targets as the run's objective saw them (one-hot rows for MSE on a classification dataset)
    x, y = float64_inputs(model, data.x_train, training_targets(data, data.y_train, train.loss))
    k = data.meta.get("k") if hasattr(model, "hidden") else None
    d0, line = describe(model, x, y, train, k)
    print(f"end of run: {line}", flush=True)
    t0 = time.time()

    def progress(done: int, m: torch.nn.Module, obj: float) -> None:
        print(f"L-BFGS {done} evaluations: {describe(m, x, y, train, k)[1]}, decrease {d0 - obj:.4g} "
              f"({(d0 - obj) / abs(d0):.3g} relative; {time.time() - t0:.0f} s)", flush=True)

    lbfgs_descent(model, x, y, train.loss, train.lam, train.reg_scale, a.evals, every=a.every, on_progress=progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())
