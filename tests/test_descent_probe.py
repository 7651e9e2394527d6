"""repcost.studies.descent_probe end to end: a real CLI run, then L-BFGS on its objective from where it stopped."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from helpers import cli

from repcost.api import load_run


ARGS = ("model=fc", "model.depth=4", "model.width=12", "data=rank_k", "data.n_train=80", "data.n_test=20",
        "data.d_in=6", "data.d_out=6", "data.k=2", "train=adam", "train.phases.0.steps=300", "train.lam=1e-3")


def _probe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repcost.studies.descent_probe", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_probe_starts_at_the_run_and_only_descends(tmp_path):
    d = tmp_path / "run"
    p = cli("repcost-train", *ARGS, f"hydra.run.dir={d}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    q = _probe(str(d), "--evals", "6", "--every", "2")
    assert q.returncode == 0, q.stderr
    lines = q.stdout.splitlines()
    objs = [float(re.search(r"objective ([0-9.e+-]+),", ln).group(1)) for ln in lines]
    assert len(objs) == 4 and "middle max s3/s2" in lines[0]
    # Jacot 2023 Prop 12 at the run's end, from the weights themselves: ‖W_ℓ‖² + ‖b_ℓ‖² against ‖W_{ℓ+1}‖²
    net = load_run(d).model()
    terms = [float((w.double() ** 2).sum() + (b.double() ** 2).sum()) for w, b in zip(net.weights, net.biases)]
    ws = [float((w.double() ** 2).sum()) for w in net.weights]
    gap = max(abs(u - v) / max(u, v) for u, v in zip(terms, ws[1:]))
    assert float(re.search(r"Prop 12 gap ([0-9.e+-]+)", lines[0]).group(1)) == pytest.approx(gap, rel=0.01)
    # the probe recomputes the objective itself: it starts where the engine's summary says the run ended
    assert objs[0] == pytest.approx(json.loads((d / "summary.json").read_text())["objective"], rel=1e-6)
    # L-BFGS with a strong-Wolfe line search never raises the objective; 300 Adam steps are far from a minimum
    assert all(b <= a for a, b in zip(objs, objs[1:])) and objs[-1] < 0.99 * objs[0]


@pytest.mark.slow
def test_probe_bad_inputs_are_one_line(tmp_path):
    for args in ([str(tmp_path / "nothing")], [str(tmp_path), "--evals", "0"]):
        q = _probe(*args)
        assert q.returncode == 2 and len(q.stderr.strip().splitlines()) == 1 and "Traceback" not in q.stderr
