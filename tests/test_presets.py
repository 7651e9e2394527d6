"""Every experiment preset composes, and its quick variant runs with a tiny step budget."""

from __future__ import annotations


import pytest
from omegaconf import OmegaConf

from repcost.config import compose_config, validate
from repcost.paths import CONFIG_DIR
from repcost.train.run import train_run

from helpers import slow_but

PRESETS = sorted(p.stem for p in (CONFIG_DIR / "experiment").glob("*.yaml"))
RECIPES = [p for p in PRESETS if p.startswith("min_norm_")]  # recipes checked by `make check-recipes`, not figures


def test_every_figure_has_a_quick_preset():
    full = [p for p in PRESETS if not p.endswith("-quick") and p not in RECIPES]
    assert all(f"{p}-quick" in PRESETS for p in full), [p for p in full if f"{p}-quick" not in PRESETS]


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_composes_and_validates(preset):
    text = (CONFIG_DIR / "experiment" / f"{preset}.yaml").read_text()
    assert text.startswith("# @package _global_"), "experiment presets are global packages"
    validate(compose_config([f"experiment={preset}"]))


@pytest.mark.parametrize("preset", slow_but([p for p in PRESETS if p.endswith("-quick")] + RECIPES,
                                             ("min_norm_1d", "jacot22-bipartite-quick", "jacot23-fig1-quick")))
def test_quick_preset_runs_a_few_steps(tmp_path, preset):
    cfg = compose_config([f"experiment={preset}", "train.progress=false"])
    n_phases, n_rounds = len(cfg.train.phases), len(cfg.train.certify.phases)
    cfg = compose_config([f"experiment={preset}", "train.progress=false"]
                         + [f"train.phases.{i}.steps=3" for i in range(n_phases)]
                         + [f"++train.phases.{i}.polish_seconds=5" for i in range(n_phases)]  # a polish: seconds, not 5 min
                         + [f"train.certify.phases.{i}.steps=3" for i in range(n_rounds)])
    spec = validate(cfg)
    s = train_run(spec, OmegaConf.to_container(cfg, resolve=True), tmp_path / "run")
    # the schedule, and escalation rounds (train.certify) only within the budget
    assert s["status"] == "finished" and 3 * n_phases <= s["steps"] <= spec.train.total_steps
