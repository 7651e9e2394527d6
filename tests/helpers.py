"""Helpers shared by the test files: paths, runners for the real entry points, small builders and tables.

Fixtures live in conftest.py; everything a test imports by name lives here.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from repcost.cli import train as train_cli
from repcost.config import compose_config, validate
from repcost.data import DATASETS, load_data
from repcost.models import build_model
from repcost.train.preempt import StopFlag
from repcost.train.run import train_run

REPO = Path(__file__).resolve().parents[1]
TINY = ["train.phases.0.steps=15", "train.phases.1.steps=0", "train.progress=false"]
QUICK = ("train.phases.0.steps=3", "train.phases.1.steps=3", "train.progress=false")


def slow_but(values: list, fast: tuple = ()) -> list:
    """Parameters for `parametrize`: those in `fast` (default: the first) run in `make test`, the others carry the
    slow marker (each case is a process start of seconds; the slow suite runs them all)."""
    fast = fast or (values[0],)
    return [v if v in fast else pytest.param(*(v if isinstance(v, tuple) else (v,)), marks=pytest.mark.slow)
            for v in values]


def pyproject() -> dict:
    """pyproject.toml of the checkout, parsed."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the same parser as the tomli backport (the dev extra installs it)
        import tomli as tomllib
    return tomllib.loads((REPO / "pyproject.toml").read_text())


# -- the console scripts ------------------------------------------------------------------------------------------
def cli(prog: str, *args: str, cwd: Path, timeout: int = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a repcost console script (as `python -m`) in `cwd`; returns the completed process."""
    module = {"repcost-train": "repcost.cli.train", "repcost-analyze": "repcost.cli.analyze",
              "repcost-collect": "repcost.cli.collect"}[prog]
    e = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=e)


def in_process(fn, prog: str, argv: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run a console entry point in-process in `cwd`; (exit code, stdout, stderr)."""
    out, err, code = io.StringIO(), io.StringIO(), 0
    old_argv, old_cwd = sys.argv, os.getcwd()
    sys.argv = [prog, *argv]
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                fn() if prog == "repcost-train" else fn(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)
    return code, out.getvalue(), err.getvalue()


def train(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    """repcost-train in-process in `cwd`; (exit code, stdout, stderr)."""
    return in_process(train_cli.main, "repcost-train", argv, cwd)


def assert_one_line(code: int, err: str, *needles: str) -> None:
    """Exit 2, no traceback, one stderr line starting with the program's name and holding every needle."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (code, err)
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("repcost-"), err
    for n in needles:
        assert n in lines[0], (n, lines[0])


class StopAfter(StopFlag):
    """A stop flag that 'receives SIGTERM' after `n` polls, one per step."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def __bool__(self) -> bool:
        self.n -= 1
        if self.n < 0:
            self.signal = 15
        return self.signal is not None


# -- bad configs every entry point must refuse in one line --------------------------------------------------------
BAD_CONFIGS = [
    ("model.depth=1", "model.depth"), ("model.width=0", "model.width"), ("model=fc model.slope=1.5", "model.slope"),
    ("model=fc model.beta=-1", "model.beta"), ("model.init_scale=0", "model.init_scale"),
    ("model.linear_width=0", "model.linear_width"), ("model=parallel model.n_subnets=0", "model.n_subnets"),
    ("model=fc model.width=[3,4,5]", "model.width"), ("model=nosuch", "model"), ("+model.foo=1", "model.foo"),
    ("data.n_points=1", "data.n_points"), ("data.x_max=-5", "data.x_max"), ("data.y_scale=0", "data.y_scale"),
    ("data.x_spacing=zigzag", "data.x_spacing"), ("data.x=[1,1]", "data.x"), ("data=nosuch", "data"),
    ("data=mnist data.digits=[3,3]", "data.digits"), ("data=mnist data.task=regress", "data.task"),
    ("data=teacher data.n_train=0", "data.n_train"), ("data=rank_k data.k=0", "data.k"),
    ("data=bipartite data.n=3", "data.n"), ("data=curve_2d data.shape=blob", "data.shape"),
    ("train.lam=-1", "train.lam"), ("train.lam=inf", "train.lam"), ("train.phases.0.lr=0", "train.phases.0.lr"),
    ("train.phases.0.lr=inf", "train.phases.0.lr"), ("train.phases.0.steps=-1", "train.phases.0.steps"),
    ("train.phases.0.optimizer=lbfgs", "train.phases.0.optimizer"),
    ("train.phases.1.batch_size=4", "train.phases.1.batch_size"),
    ("train.phases.0.momentum=1", "train.phases.0.momentum"), ("train.phases.0.schedule=step", "train.phases.0.schedule"),
    ("train.phases.0.final_lr_ratio=0", "train.phases.0.final_lr_ratio"),
    ("+train.phases.1.lam_factor=10", "lam_factor"), ("train.reg_scale=two", "train.reg_scale"),
    ("train.loss=l1", "train.loss"), ("train.target_loss=-1", "train.target_loss"),
    ("train.plateau_window=-1", "train.plateau_window"), ("train.check_every=0", "train.check_every"),
    ("train.log_every=0", "train.log_every"), ("train.ensemble_size=0", "train.ensemble_size"),
    ("train.certify_descent=-1", "train.certify_descent"),
    ("train.checkpoint_every=-1", "train.checkpoint_every"), ("train.grad_tol=0", "train.grad_tol"),
    ("train.diverge_factor=0.5", "train.diverge_factor"), ("train=nosuch", "train"), ("+train.foo=1", "train.foo"),
    ("seed=-1", "seed"), ("dtype=float16", "dtype"), ("device=tpu", "device"), ("+foo=1", "foo"),
    ("analysis.every=-1", "analysis.every"), ("analysis.n_points=0", "analysis.n_points"),
    ("analysis=spectra analysis.options.which=bogus", "analysis.options.which"),
    ("+analysis.options.centerd=false", "analysis.options.centerd"),
    ("analysis=spectra analysis.options.points=val", "analysis.options.points"),
    ("analysis=spectra analysis.options.rel_tol=2", "analysis.options.rel_tol"),
    ("analysis.analyses=[hiden]", "analysis.analyses"), ("analysis=nosuch", "analysis"),
    ("experiment=nosuch", "experiment"), ("experiment=ongie22-fig1-quik", "ongie22-fig1-quick"),
    ("model=fc analysis.analyses=[costs]", "costs"), ("train.loss=cross_entropy", "cross_entropy"),
    ("train.compile=maybe", "train.compile"), ("train.cuda_graphs=yes", "train.cuda_graphs"),
]
if not torch.cuda.is_available():
    BAD_CONFIGS.append(("device=cuda", "device"))
    BAD_CONFIGS.append(("train.cuda_graphs=on", "train.cuda_graphs"))


# -- runs without the CLI -----------------------------------------------------------------------------------------
REL = 1e-10  # float64: members and single runs agree to ~1e-15 after 50 steps; 1e-10 leaves ample room


def train_direct(tmp_path: Path, *overrides: str, name: str = "run", stop_flag=None):
    """(train_run's result, run dir): the overrides composed, validated and trained without the CLI."""
    cfg = compose_config(["train.progress=false", *overrides])
    spec = validate(cfg)
    return train_run(spec, OmegaConf.to_container(cfg, resolve=True), tmp_path / name, stop_flag=stop_flag), \
        tmp_path / name


def load(path):
    return torch.load(path, weights_only=True)


def close(a: float, b: float, rel: float = REL) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-300)


def assert_member_matches_single(ens_dir, i, single_summary, single_dir):
    m = json.loads((ens_dir / "members" / str(i) / "summary.json").read_text())
    s = single_summary
    assert set(m) == set(s)  # the same keys as a single run's summary
    for k in ("objective", "train_loss", "param_sq_norm", "param_sq_norm_per_depth", "cost", "test_loss"):
        if k in s:
            assert close(m[k], s[k]), (i, k, m[k], s[k])
    for k in ("seed", "steps", "stop_reason", "status", "config_hash", "depth", "model", "data", "dtype"):
        assert m[k] == s[k], (i, k, m[k], s[k])
    a = load(single_dir / "checkpoint.pt")
    b = load(ens_dir / "members" / str(i) / "checkpoint.pt")
    assert set(a) == set(b) and set(a["trainer"]) == set(b["trainer"])
    assert a["config_hash"] == b["config_hash"] and a["config"] == b["config"]
    pa, pb = a["trainer"]["position"], b["trainer"]["position"]
    assert pa.keys() == pb.keys()
    for k in pa:  # counters exactly; recorded objectives (first value, plateau best) to round-off
        assert pa[k] == pb[k] if isinstance(pa[k], int) else close(pa[k], pb[k]), (k, pa[k], pb[k])
    assert torch.equal(a["trainer"]["generator"], b["trainer"]["generator"])  # same minibatch draws
    for k, t in a["trainer"]["model"].items():
        u = b["trainer"]["model"][k]
        assert u.shape == t.shape and u.dtype == t.dtype
        assert (u - t).abs().max() <= REL * max(t.abs().max(), 1e-12), k
    oa, ob = a["trainer"]["optimizer"], b["trainer"]["optimizer"]
    assert oa["param_groups"] == ob["param_groups"] and oa["state"].keys() == ob["state"].keys()
    for j in oa["state"]:
        for k, t in oa["state"][j].items():
            u = ob["state"][j][k]
            assert (u - t).abs().max() <= REL * max(t.abs().max(), 1e-12) if torch.is_tensor(t) else u == t
    return m


# -- small models and data ----------------------------------------------------------------------------------------
def one_unit_net(a: float, w: float):
    """fc L = 2, one ReLU unit, no bias: f(x) = a·relu(w·x)."""
    spec = validate(compose_config(["model=fc", "model.depth=2", "model.width=1", "model.beta=0"]))
    m = build_model(spec.model, 1, 1, 0)
    with torch.no_grad():
        m.weights[0].fill_(w)
        m.weights[1].fill_(a)
    return m


def data_schema(name: str, **kw):
    """Validated schema instance for dataset `name` with overrides."""
    return DATASETS.get(name).schema(**kw)


def dataset(name: str, **kw):
    """The DataBundle of dataset `name` with overrides."""
    return load_data(data_schema(name, **kw))


def tensors(b) -> list[torch.Tensor]:
    """The bundle's tensors that exist (train and, where there is one, test)."""
    return [t for t in (b.x_train, b.y_train, b.x_test, b.y_test) if t is not None]


def rows(x: torch.Tensor) -> set:
    """The rows of `x` as bytes, to compare sets of samples exactly."""
    return {r.tobytes() for r in x.numpy()}


# -- a user's config dir and plugin package -----------------------------------------------------------------------
RING_PLUGIN = '''
"""A user's dataset: n points on the unit circle, target cos(k·angle)."""
import math
from dataclasses import dataclass

import torch

from repcost.data import DataBundle
from repcost.registry import DATASETS


@dataclass
class RingConfig:
    name: str = "ring"
    n_points: int = 8
    k: int = 2


@DATASETS.register("ring", RingConfig)
def load_ring(cfg: RingConfig) -> DataBundle:
    t = torch.arange(cfg.n_points, dtype=torch.float64) * (2 * math.pi / cfg.n_points)
    x = torch.stack([t.cos(), t.sin()], dim=1)
    return DataBundle("ring", x, (cfg.k * t).cos()[:, None])
'''


def user_setup(tmp_path: Path, preset_plugins: bool) -> tuple[Path, Path]:
    """(config dir, python path dir): a plugin package `ringdata`, its data/ring.yaml and a preset using it."""
    pkgs, conf = tmp_path / "pkgs", tmp_path / "myconf"
    (pkgs / "ringdata").mkdir(parents=True)
    (pkgs / "ringdata" / "__init__.py").write_text(RING_PLUGIN)
    (conf / "data").mkdir(parents=True)
    (conf / "experiment").mkdir()
    (conf / "data" / "ring.yaml").write_text("name: ring\nn_points: 12\nk: 3\n")
    plugins = "plugins: [ringdata]\n" if preset_plugins else ""
    (conf / "experiment" / "ring-study.yaml").write_text(textwrap.dedent("""\
        # @package _global_
        defaults:
          - override /model: fc
          - override /data: ring
        model:
          depth: 3
          width: 5
        """) + plugins)
    return conf, pkgs


# -- documented commands (tests/test_docs_commands.py; the wheel test runs README's) ------------------------------
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


def stored_net(name: str, family: str, d_in: int, d_out: int, **schema) -> tuple:
    """(model, x, y) stored in tests/fixtures/`name`: a float64 `family` net of `schema` with its state and its data
    (y as stored: float targets, or class labels)."""
    from repcost.models import MODELS

    stored = json.loads((REPO / "tests" / "fixtures" / name).read_text())
    spec = MODELS.get(family)
    m = spec.build(spec.schema(**schema), d_in, d_out, torch.Generator().manual_seed(0)).double()
    m.load_state_dict({k: torch.tensor(v, dtype=torch.float64) for k, v in stored["state"].items()})
    y = torch.tensor(stored["y"])
    return m, torch.tensor(stored["x"], dtype=torch.float64), y.double() if y.is_floating_point() else y
