"""The polish (`train/polish.py`) on finished runs: the critical-point certificate before and after, one line each.

Each run's best member (the run itself when it has no members) is loaded, certified, polished in float64 and
certified again, as REPRODUCTION.md's two-rays critical points are measured; the run directory is only read. Each
certificate comes with Jacot 2023's terms where they apply (`descent_probe.claims`): the middle layers' rank ratio on
rank-k data, the Prop 12 gap of a layered net.

    python benchmarks/polish_runs.py RUN_DIR [RUN_DIR ...] [--iterations 2000] [--seconds 300] [--tol 1e-7] [--merge 0.99]

With --merge C each net's groups of units at cosine > C are merged first (`merge_units`, as the phase option).
"""

from __future__ import annotations

import argparse

import torch

from repcost.analysis.alignment import merge_units
from repcost.analysis.critical import critical_point_certificate
from repcost.api import Run
from repcost.config.schema import PhaseConfig
from repcost.objective import training_targets
from repcost.studies.descent_probe import claims
from repcost.train.polish import polish


def measure(run_dir: str, iterations: int, seconds: float, tol: float, merge: float | None = None) -> str:
    """One run's line: certificate at the end of training, what the polish did, certificate at the polished point."""
    run = Run(run_dir)
    best = run.summary.get("best_member")
    member = run.members()[best] if best is not None else run
    net, data, t = member.model(), member.data(), member.spec.train
    x, y = data.x_train, training_targets(data, data.y_train, t.loss)
    k = data.meta.get("k") if hasattr(net, "hidden") else None  # rank-k data: the middle layers' verdict (Jacot 2023)

    def certify() -> str:
        c = critical_point_certificate(net, x, y, t.loss, t.lam, t.reg_scale)
        measure = c.get("clarke_stationarity", c["stationarity"])
        verdict = "yes" if c["critical_point"] else "no"
        terms = "".join(f", {t}" for t in claims(net, x, k))
        return f"critical point: {verdict} (measure {measure:.2g}, C {float(net.cost().detach()):.6g}{terms})"

    before = certify()
    merged = f" ({merge_units(net, x, merge)} units first merged or dead set to 0: from there)" if merge else ""
    r = polish(net, x, y, t.loss, t.lam, t.reg_scale, iterations, seconds, tol)
    change = r.objective_end / r.objective_start - 1
    return (f"{run_dir}: {before} -> {certify()}; polish {r.iterations} iterations, {r.seconds:.1f} s, "
            f"{r.removed} units removed, objective {change:+.1e} relative{merged}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="finished run directories (e.g. check_recipes' rays_L2_250)")
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--seconds", type=float, default=300.0, help="the polish's wall-time budget per run")
    p.add_argument("--tol", type=float, default=PhaseConfig.polish_tol, help="the polish's tolerance (polish_tol)")
    p.add_argument("--merge", type=float, default=None, help="merge the groups at cosine above this first")
    a = p.parse_args()
    torch.set_num_threads(1)
    for run_dir in a.runs:
        print(measure(run_dir, a.iterations, a.seconds, a.tol, a.merge), flush=True)


if __name__ == "__main__":
    main()
