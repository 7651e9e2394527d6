"""Every command in README.md and docs/*.md runs as written (README.md, "Documentation").

A command is a line of a ```bash or ```sh block (a trailing `\\` joins the next line), a ```python block (run
with the venv's python), or a `$ ` line of any other block, whose following lines are its expected output. A
```python or ```yaml block whose first line is `# PATH` is a file the commands use: it is written to PATH first.
A command that cannot run in a test says in its comment what it needs: `# needs: a GPU`.

The fast test checks every command statically (each `repcost-train` config composes and validates, each
`make` target exists) and runs those that train nothing (`--help`, `--cfg`, the transcripts). The slow test
runs every unmarked command of a doc in order, in one fresh folder (also HOME), with the test's
venv first on PATH and only these additions: `device=cuda` becomes `device=cpu`, training phases are cut
to STEPS steps, RUN_DIR is the run the doc made last, and `make T` runs the recipe `make -n T` prints.
"""

from __future__ import annotations

import subprocess

import pytest
from helpers import REPO, compose, parse, repcost_train, run, sandbox

DOCS = [d for d in (REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))) if parse(d)[0]]


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_documented_commands_are_well_formed(doc, tmp_path):
    """Fast: each `repcost-train` config validates, each make target exists; the commands that train nothing run."""
    from repcost.config import validate

    cmds, files = parse(doc)
    home = sandbox(tmp_path, files)
    for c in cmds:
        w = c.words
        if w[0] == "make":
            p = subprocess.run(["make", "-n", "-C", str(REPO), *w[1:]], capture_output=True, text=True, check=False)
            assert p.returncode == 0, f"{c.where}: {c.text}\n{p.stderr}"
        elif (t := repcost_train(w)) and c.trains and "plugins" not in c.text:  # a plugin needs its import path
            try:
                validate(compose(["device=cpu" if x == "device=cuda" else x for x in t], home, home))
            except Exception as e:  # noqa: BLE001  (Hydra's and repcost's config errors alike)
                pytest.fail(f"{c.where}: {c.text}\n{type(e).__name__}: {e}")
        if not c.trains and not c.needs:
            run(c, home)


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_documented_commands_run(doc, tmp_path):
    """Slow: every unmarked command of the doc, in order, in one fresh folder."""
    cmds, files = parse(doc)
    home = sandbox(tmp_path, files)
    for c in cmds:
        if not c.needs:
            run(c, home)


def test_readme_fits_its_budget():
    assert len((REPO / "README.md").read_text().splitlines()) <= 250  # the developer guide's bar
