"""Every registered model family and dataset is a Hydra group option made of its schema's defaults, and every
analysis preset validates. The lists come from the registries, so a new entry is covered without editing this file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from omegaconf import OmegaConf


from repcost.config import compose_config
from repcost.config.schema import AnalysisConfig, CriticalOptions, validate_options
from repcost.paths import CONFIG_DIR
from repcost.registry import ANALYSES, DATASETS, MODELS

ENTRIES = [("model", n) for n in MODELS.names()] + [("data", n) for n in DATASETS.names()]


@pytest.mark.parametrize("group,name", ENTRIES, ids=[f"{g}/{n}" for g, n in ENTRIES])
def test_each_group_option_is_its_schema_defaults(group, name):
    """`model=<name>` / `data=<name>` compose to the schema's defaults, every key overridable from the command line."""
    schema = (MODELS if group == "model" else DATASETS).get(name).schema
    node = compose_config([f"{group}={name}"])[group]
    assert OmegaConf.to_container(node) == OmegaConf.to_container(OmegaConf.structured(schema))
    key = next(f.name for f in dataclasses.fields(schema) if f.name != "name")
    assert key in compose_config([f"{group}={name}", f"{group}.{key}=null"])[group]


@pytest.mark.parametrize("registry", [MODELS, DATASETS], ids=["model", "data"])
def test_help_lists_the_registered_names(registry):
    own = [n for n in registry.names() if registry.get(n).module.startswith(registry.package)]  # not a test's plugin
    assert registry.declared() == own  # read from the sources, as --help does without importing them


@pytest.mark.parametrize("path", sorted((Path(CONFIG_DIR) / "analysis").glob("*.yaml")), ids=lambda p: p.stem)
def test_analysis_presets_validate(path):
    node = compose_config([f"analysis={path.stem}"]).analysis
    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(AnalysisConfig), node))
    built = validate_options(cfg)
    assert set(cfg.analyses) <= set(ANALYSES.names())
    for name in ANALYSES.names():  # every analysis's options dataclass is built from the preset's options
        schema = ANALYSES.get(name).schema
        if schema is CriticalOptions:  # the certificate's own node, analysis.critical
            assert isinstance(cfg.critical, CriticalOptions)
            continue
        opts = built[schema]
        assert isinstance(opts, schema)
        assert all(getattr(opts, k) == v for k, v in (cfg.options or {}).items() if hasattr(opts, k))
