"""pyproject.toml lists every package of src/repcost (find cannot be used: configs/ is mapped into repcost)."""

from __future__ import annotations

import tomllib
from conftest import REPO


def test_every_python_directory_is_a_listed_package():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    src = REPO / "src"
    found = {".".join(p.parent.relative_to(src).parts) for p in src.joinpath("repcost").rglob("*.py")
             if "__pycache__" not in p.parts}
    assert found <= listed, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(found - listed)}"
    assert "repcost.configs" in listed


def test_checkout_config_dir_is_the_top_level_configs():
    from repcost.paths import CONFIG_DIR

    assert CONFIG_DIR == (REPO / "configs").resolve()
