"""Every registered model family, dataset and analysis has its YAML, and each YAML matches its schema.

The lists come from the registries, so a new entry is covered without editing this file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from omegaconf import OmegaConf


from repcost.config.schema import AnalysisConfig, CriticalOptions, validate_options
from repcost.paths import CONFIG_DIR
from repcost.registry import ANALYSES, DATASETS, MODELS

ENTRIES = [("model", n) for n in MODELS.names()] + [("data", n) for n in DATASETS.names()]


@pytest.mark.parametrize("group,name", ENTRIES, ids=[f"{g}/{n}" for g, n in ENTRIES])
def test_yaml_matches_schema(group, name):
    path = Path(CONFIG_DIR) / group / f"{name}.yaml"
    assert path.exists(), f"{name} is registered but {path} is missing"
    yaml = OmegaConf.load(path)
    schema = (MODELS if group == "model" else DATASETS).get(name).schema
    assert set(yaml.keys()) == {f.name for f in dataclasses.fields(schema)}
    assert OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), yaml)) == schema()


@pytest.mark.parametrize("group", ["model", "data"])
def test_every_yaml_is_registered(group):
    registry = MODELS if group == "model" else DATASETS
    for path in (Path(CONFIG_DIR) / group).glob("*.yaml"):
        assert path.stem in registry.names(), f"{path} has no registered {group}"


@pytest.mark.parametrize("path", sorted((Path(CONFIG_DIR) / "analysis").glob("*.yaml")), ids=lambda p: p.stem)
def test_analysis_presets_validate(path):
    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(AnalysisConfig), OmegaConf.load(path)))
    opts = validate_options(cfg)
    assert set(cfg.analyses) <= set(ANALYSES.names())
    for name in ANALYSES.names():  # every analysis's options dataclass takes the validated options
        schema = ANALYSES.get(name).schema
        if schema is CriticalOptions:  # the certificate's own node, analysis.critical
            assert isinstance(cfg.critical, CriticalOptions)
            continue
        schema(**{f.name: opts[f.name] for f in dataclasses.fields(schema)})
