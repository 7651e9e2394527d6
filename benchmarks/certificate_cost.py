"""The certificate's share of a run's wall time (the demo and `jacot23-fig1-quick`; target <= 10 %).

Each preset is trained once with the certificate off (`analysis.critical.enabled=false`); then the
certificate with its default options (`config.schema.CriticalOptions`) is timed on the trained model,
as the end of a run computes it. Share = certificate / (training + certificate).

    python benchmarks/certificate_cost.py [--presets demo jacot23-fig1-quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from omegaconf import OmegaConf

from repcost.analysis.critical import critical_point_certificate
from repcost.api import Run
from repcost.config import compose_config, validate
from repcost.config.schema import CriticalOptions
from repcost.objective import training_targets
from repcost.train.run import train_run

PRESETS = {"demo": [], "jacot23-fig1-quick": ["experiment=jacot23-fig1-quick"]}


def measure(name: str, workdir: Path) -> tuple[float, float, dict]:
    """(training seconds, certificate seconds, certificate) of one preset."""
    cfg = compose_config([*PRESETS[name], "train.progress=false", "analysis.critical.enabled=false"])
    summary = train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), workdir / name)
    run = Run(workdir / name)
    model, data, t = run.model(), run.data(), run.spec.train
    o = CriticalOptions()
    start = time.perf_counter()
    cert = critical_point_certificate(model, data.x_train, training_targets(data, data.y_train, t.loss), t.loss,
                                      t.lam, t.reg_scale, o.stationarity_tol, o.gap_tol, o.descent_evals, o.max_kinks)
    return summary["wall_time_s"], time.perf_counter() - start, cert


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="*", default=list(PRESETS), choices=list(PRESETS))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.presets:
            train_s, cert_s, cert = measure(name, Path(tmp))
            print(f"{name:20s} training {train_s:8.2f} s  certificate {cert_s:6.2f} s  "
                  f"share {cert_s / (train_s + cert_s):6.2%}  (kinks {cert.get('kinks', 0)}, "
                  f"critical point {cert['critical_point']})", flush=True)


if __name__ == "__main__":
    main()
