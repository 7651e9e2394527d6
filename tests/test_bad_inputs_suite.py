"""The bad-input suite (slow): every case of tests/test_bad_inputs.py's config table plus a generated sweep over
every key of every model family, dataset and the train section, each set to values of the wrong type, out of range
or absurdly large. Each case must end as promised: a clean success, or one stderr line and exit 2 — never a
traceback. Run in-process (`pytest -m slow tests/test_bad_inputs_suite.py`); `CASES` holds the count.
"""

from __future__ import annotations

import dataclasses

import pytest

from repcost.config.schema import PhaseConfig, TrainConfig
from repcost.registry import DATASETS, MODELS
from helpers import QUICK, train, BAD_CONFIGS


pytestmark = pytest.mark.slow

HUGE_INT = str(10**30)
SKIP = {"name", "root", "phases"}  # group choices and paths are covered by the hand-written cases
BUDGETS = {"steps", "plateau_window", "certify_descent"}  # a huge budget is a valid (endless) run, not a bad input


def _values(default) -> list[str]:
    """Bad values for a key whose default is `default`: wrong type, out of range, absurdly large."""
    if isinstance(default, bool):
        return ["abc", "2"]
    if isinstance(default, int):
        return ["abc", "-1", HUGE_INT]
    if isinstance(default, float):
        return ["abc", "-1", "1e30", "nan"]
    if isinstance(default, str):
        return ["zzz_bogus", "''"]
    if isinstance(default, list) or default is None:
        return ["abc", "[-1]"]
    return ["abc"]


def _section_cases(group: str, choice: str | None, schema: type) -> list[tuple[str, str]]:
    pick = [f"{group}={choice}"] if choice else []
    cases = []
    for f in dataclasses.fields(schema):
        if f.name in SKIP:
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        for v in _values(default):
            if v == HUGE_INT and f.name in BUDGETS:
                continue
            cases.append((" ".join([*pick, f"{group}.{f.name}={v}"]), f"{group}.{f.name}"))
    return cases


def _generated() -> list[tuple[str, str]]:
    import repcost.data  # noqa: F401  (registers the datasets)
    import repcost.models  # noqa: F401  (registers the families)

    cases = []
    for name in MODELS.names():
        cases += _section_cases("model", name, MODELS.get(name).schema)
    for name in DATASETS.names():
        cases += _section_cases("data", name, DATASETS.get(name).schema)
    cases += _section_cases("train", None, TrainConfig)
    cases += [(c.replace("train.", "train.phases.0.", 1), k) for c, k in _section_cases("train", None, PhaseConfig)]
    for key, default in (("seed", 0), ("dtype", "x"), ("device", "x"), ("logger", "x")):
        cases += [(f"{key}={v}", key) for v in _values(default)]
    return cases


ENVIRONMENT = [("-m name=../../etc seed=0", "name"), ("hydra.run.dir=", "hydra.run.dir"),
               ("plugins=['']", "plugins"), ("plugins=[.x]", "plugins"), ("plugins=[no_such_plugin_xyz]", "plugins"),
               ("train.ensemble_size=100000000", "train.ensemble_size")]
CASES = [(o, n) for o, n in BAD_CONFIGS] + ENVIRONMENT + _generated()


@pytest.mark.parametrize("overrides,key", CASES, ids=[c[0] for c in CASES])
def test_no_traceback(tmp_path, overrides, key):
    argv = overrides.split()
    flags = [a for a in argv if a == "-m"]
    code, _, err = train([*flags, *QUICK, *[a for a in argv if a != "-m"], f"hydra.run.dir={tmp_path / 'run'}"],
                         tmp_path)
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 0 or (code == 2 and len(lines) == 1 and lines[0].startswith("repcost-train: error:")), (code, err)


def test_the_suite_is_large_enough():
    assert len(CASES) >= 180, len(CASES)


def test_two_launches_of_one_sweep_at_once_finish_every_job_once(tmp_path):
    """Two launches of one sweep at once: each exits 0 or with one tally line of the sweep's jobs that names only
    files that exist, no traceback, and in the end every job is finished once."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    argv = [sys.executable, "-m", "repcost.cli.train", "-m", "name=c", "seed=0,1,2", *QUICK, "train.phases.0.steps=4000"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    sweep = tmp_path / "outputs" / "sweeps" / "c"
    first = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 300
    while not list(sweep.glob("*/metrics.jsonl")) and time.time() < deadline:  # the first launch trains its first job
        time.sleep(0.2)
    second = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    for p in (first, second):
        _, err = p.communicate(timeout=600)
        assert "Traceback" not in err, err
        tally = [ln for ln in err.splitlines() if ln.startswith("repcost-train: error:")]
        if p.returncode == 0:
            assert not tally, err
            continue
        assert p.returncode == 1 and len(tally) == 1 and " of 3 jobs failed" in tally[0], err
        named = [w for w in tally[0].split() if w.endswith("error.txt")]
        assert all(Path(w).is_file() for w in named), tally[0]
    assert len([d for d in sweep.iterdir() if (d / "FINISHED").exists()]) == 3
    again = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0 and again.stdout.count("already finished") == 3, again.stderr
