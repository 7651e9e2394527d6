"""pyproject.toml matches the code: every package of src/repcost is listed (find cannot be used: configs/ is mapped
into repcost), and every module the tests import is the standard library, repcost, or a listed dependency."""

from __future__ import annotations

import ast
import re
import sys

from helpers import REPO, pyproject

IMPORT_NAMES = {"hydra-core": "hydra", "hydra-joblib-launcher": "hydra_plugins", "pyyaml": "yaml"}  # distributions named otherwise


def test_every_python_directory_is_a_listed_package():
    listed = set(pyproject()["tool"]["setuptools"]["packages"])
    src = REPO / "src"
    found = {".".join(p.parent.relative_to(src).parts) for p in src.joinpath("repcost").rglob("*.py")
             if "__pycache__" not in p.parts}
    assert found <= listed, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(found - listed)}"
    assert all((src / (p.replace(".", "/"))).joinpath("__init__.py").exists()
               for p in found), "every package directory has an __init__.py"
    assert "repcost.configs" in listed


def test_every_module_the_tests_import_is_a_declared_dependency():
    project = pyproject()["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    dists = {re.split(r"[ ;<>=\[!~]", r, maxsplit=1)[0].lower() for r in requirements}
    declared = {IMPORT_NAMES.get(d, d.replace("-", "_")) for d in dists}
    local = {"repcost", "helpers", "conftest"} | {p.stem for p in (REPO / "tests").glob("*.py")}
    imported = set()
    for path in (REPO / "tests").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
    missing = imported - set(sys.stdlib_module_names) - local - declared - {"__future__"}
    assert not missing, f"declare in pyproject.toml (a dependency or the dev extra): {sorted(missing)}"
    dev = {re.split(r"[ ;<>=\[!~]", r, maxsplit=1)[0] for r in project["optional-dependencies"]["dev"]}
    assert {"pytest", "pytest-xdist", "ruff"} <= dev  # `make test` runs `pytest -n 2`; ruff keeps the code clean
    if not project["requires-python"].startswith(">=3.11"):
        assert "tomli" in dev  # helpers.pyproject reads TOML with tomli where tomllib (Python 3.11+) is missing


def test_checkout_config_dir_is_the_top_level_configs():
    from repcost.paths import CONFIG_DIR

    assert CONFIG_DIR == (REPO / "configs").resolve()
