"""`make demo` (`repcost-train train=certified`): the default model and data end certified within 1 % of the global
minimum of their objective by the 1-D duality gap, at a point the critical-point certificate accepts too (a global
minimiser is a critical point, and its own dual point is feasible), the run says what that means, and its figure
shows the fit."""

from __future__ import annotations

import json
import re
from helpers import REPO



def test_make_demo_certifies_its_global_minimum(tmp_path, run_cli):
    demo = re.search(r"^demo:.*\n\t\$\(VENV\)/bin/repcost-train(.*)$", (REPO / "Makefile").read_text(), re.M)
    assert demo is not None  # the Makefile's demo line is the command tested here
    d = tmp_path / "run"
    p = run_cli("repcost-train", *demo.group(1).split(), "train.progress=false", f"hydra.run.dir={d}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    s = json.loads((d / "summary.json").read_text())
    assert s["certified"] and s["stop_reason"] == "certified"
    assert s["certify.duality_gap_rel"] <= 0.01 and s["certify.dual_value"] <= s["objective"]
    assert s["critical_point"] is True and s["certify.dual_violation"] <= 1 + 1e-4  # both certificates accept it
    out = p.stdout + p.stderr
    assert "certified within" in out and "no two-layer net of any width" in out
    assert "critical point: yes" in out and "not a critical point" not in out
    assert (d / "figures" / "fit.png").stat().st_size > 10_000
