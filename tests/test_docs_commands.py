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

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO

STEPS = 20
BIN = Path(sys.executable).parent  # the venv running the tests (make setup's .venv)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


@dataclass
class Command:
    where: str  # doc:line
    text: str  # as written (continuations joined), comment included
    expect: str | None = None  # a transcript's output
    python: bool = False  # a ```python block

    @property
    def needs(self) -> str | None:
        m = re.search(r"#.*\bneeds: ([^)]+)", self.text)
        return m.group(1) if m else None

    @property
    def words(self) -> list[str]:
        return ["python"] if self.python else shlex.split(self.text, comments=True)

    @property
    def trains(self) -> bool:
        """Whether it trains, or reads what training wrote (the slow test runs it)."""
        return self.python or not ({"--help", "-h", "--cfg"} & set(self.words)) and self.expect is None


def parse(doc: Path) -> tuple[list[Command], dict[str, str]]:
    """The doc's commands in order, and its files (path -> text)."""
    text, cmds, files = doc.read_text(), [], {}
    for m in FENCE.finditer(text):
        lang, body = m.group(1), m.group(2)
        line = text[: m.start(2)].count("\n") + 1
        first = body.split("\n", 1)[0]
        if lang in ("python", "yaml") and re.fullmatch(r"# [~\w./-]+\.(py|yaml)", first):
            files[first[2:]] = body.split("\n", 1)[1]
        elif lang == "python":
            cmds.append(Command(f"{doc.name}:{line}", body, python=True))
        elif lang in ("bash", "sh"):
            for i, ln in enumerate(re.sub(r"\\\n\s*", "", body).splitlines()):  # a few joined lines shift `line`
                if ln.strip() and not ln.lstrip().startswith("#"):
                    cmds.append(Command(f"{doc.name}:{line + i}", ln.strip()))
        else:
            lines = body.splitlines()
            for i, ln in enumerate(lines):
                if ln.startswith("$ "):
                    out = [o for o in lines[i + 1:] if not o.startswith("$ ")]
                    cmds.append(Command(f"{doc.name}:{line + i}", ln[2:], "\n".join(out).strip()))
    return cmds, files


def train_args(words: list[str], cwd: Path, home: Path) -> list[str]:
    """A `repcost-train` invocation's words with the documented additions (device=cpu, fewer steps)."""
    words = ["device=cpu" if w == "device=cuda" else w for w in words]
    cfg = compose(words, cwd, home)
    return [*words, f"train.phases.0.steps={STEPS}", *[f"train.phases.{i}.steps=0" for i in
                                                         range(1, len(cfg.train.phases))]]


def compose(words: list[str], cwd: Path, home: Path):
    """The config of a `repcost-train` invocation run in `cwd` with HOME `home` (a sweep's first job)."""
    from repcost.config import compose_config

    args, dirs = [], []
    it = iter(words[1:])
    for w in it:
        if w == "--config-dir":
            d = next(it)
            dirs.append(home / d[2:] if d.startswith("~/") else cwd / d)
        elif "=" in w and not w.startswith("-"):
            key, value = w.split("=", 1)
            if "-m" in words and not value.startswith(("[", "{")):
                value = value.split(",")[0]  # a sweep's first value
            args.append(f"{key}={value}")
    return compose_config([a for a in args if not a.lstrip("+~").startswith("hydra")], config_dirs=dirs)


def repcost_train(words: list[str]) -> list[str] | None:
    """The words of the `repcost-train` invocation in a command (after `cd … &&` and `VAR=…`), or None."""
    return words[words.index("repcost-train"):] if "repcost-train" in words else None


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


def sandbox(tmp: Path, files: dict[str, str]) -> Path:
    home = tmp / "home"
    home.mkdir()
    for name, body in files.items():
        path = home / name.removeprefix("~/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return home


def run(c: Command, home: Path, bin_dir: Path = BIN) -> None:
    """Run a command in `home` with `bin_dir` (a venv's) first on PATH; fails unless it does what the doc says."""
    words, script = c.words, c.text
    if words[0] == "make":  # the target's own recipe (setup: the venv of bin_dir)
        venv = bin_dir.parent
        p = subprocess.run(["make", "-s", "-n", "-o", str(venv / ".installed"), "-C", str(REPO), f"VENV={venv}", *words[1:]],
                           capture_output=True, text=True, check=True)
        script = p.stdout
    elif not c.python:
        script = re.sub(r"\s#.*$", "", c.text).replace("device=cuda", "device=cpu")
        if "RUN_DIR" in words:
            runs = sorted(home.glob("**/FINISHED"), key=lambda f: f.stat().st_mtime)
            assert runs, f"{c.where}: RUN_DIR but no finished run before it"
            script = script.replace("RUN_DIR", str(runs[-1].parent))
        if c.trains and (t := repcost_train(words)):  # `[cd DIR &&] [VAR=… ]repcost-train …`, last in the line
            cds = [d for w, d in zip(words, words[1:len(words) - len(t)]) if w == "cd"]
            cwd = home / cds[-1].removeprefix("~/") if cds else home
            script += "".join(f" {a}" for a in train_args(t, cwd, home)[len(t):])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REPCOST_CONFIG_DIR", "VIRTUAL_ENV")}
    env.update(HOME=str(home), PATH=f"{bin_dir}:{env['PATH']}", MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    args = [str(bin_dir / "python"), "-c", c.text] if c.python else ["bash", "-c", script]
    p = subprocess.run(args, cwd=home, env=env, capture_output=True, text=True, timeout=600,
                       check=False)
    if c.expect is not None:
        assert (p.stdout + p.stderr).strip() == c.expect, f"{c.where}: {c.text}\n{p.stdout}{p.stderr}"
    else:
        assert p.returncode == 0, f"{c.where}: {c.text}\nran: {script}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"


def test_readme_fits_its_budget():
    assert len((REPO / "README.md").read_text().splitlines()) <= 250  # the developer guide's bar
