"""Run identity (repcost.identity): keys at their schema default never count, bookkeeping keys never count."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from repcost.config import compose_config
from repcost.config.schema import PhaseConfig, TrainConfig
from repcost.identity import run_hash, run_identity, strip_defaults
from omegaconf import OmegaConf

FIXTURE = Path(__file__).parent / "fixtures" / "legacy_run"


def _cfg(*overrides: str) -> dict:
    return OmegaConf.to_container(compose_config(list(overrides)), resolve=True)


def test_bookkeeping_keys_do_not_change_the_hash():
    base = _cfg("train.lam=1e-3")
    same = _cfg("train.lam=1e-3", "name=b", "force=true", "train.progress=false", "train.checkpoint_every=500")
    assert run_hash(base) == run_hash(same)
    for o in ("seed=1", "train.lam=1e-4", "model.width=7", "data.n_points=4", "dtype=float32",
              "train.phases.0.lr=0.5", "+train.phases.0.lam_factor=10"):
        assert run_hash(_cfg("train.lam=1e-3", o)) != run_hash(base), o


def test_keys_at_their_schema_default_are_left_out_generically():
    """A config that spells a default out and one that leaves it out are the same run (any section)."""
    cfg = _cfg()
    for section, key, default in (("train", "diverge_factor", TrainConfig.diverge_factor),
                                  ("train", "grad_tol", None), ("train", "ensemble_size", 1)):
        stripped = {**cfg, section: {k: v for k, v in cfg[section].items() if k != key}}
        assert run_hash(stripped) == run_hash(cfg), key
        assert run_hash({**cfg, section: {**cfg[section], key: default}}) == run_hash(cfg), key
    phase_defaults = {f.name: f.default for f in dataclasses.fields(PhaseConfig)}
    assert strip_defaults(phase_defaults, PhaseConfig) == {}
    # a new key added to a schema with a default: simulate by a schema with one more field
    Extended = dataclasses.make_dataclass("Extended", [("new_key", int, dataclasses.field(default=3))],
                                          bases=(TrainConfig,))
    with_new = {**cfg["train"], "new_key": 3}
    assert strip_defaults(with_new, Extended) == strip_defaults(cfg["train"], TrainConfig)


def test_a_key_added_to_a_nested_section_counts_only_where_set():
    """`train.certify` away from its default is hashed as one section (train=certified, `make demo`); a key added
    to it later (`cost_tol`) counts only where it is set, so a run made before the key existed keeps its hash."""
    cfg = _cfg("train=certified")
    certify = cfg["train"]["certify"]
    before = {**cfg, "train": {**cfg["train"], "certify": {k: v for k, v in certify.items() if k != "cost_tol"}}}
    assert "cost_tol" in certify and run_hash(before) == run_hash(cfg)
    for o in ("train.certify.cost_tol=0.05", "train.certify.step_growth=3"):
        assert run_hash(_cfg("train=certified", o)) != run_hash(cfg), o


def test_device_counts_by_what_it_resolves_to():
    import torch

    here = "cuda" if torch.cuda.is_available() else "cpu"
    assert run_hash(_cfg("device=auto")) == run_hash(_cfg(f"device={here}"))
    assert run_identity(_cfg("device=auto"))["device"] == here


def _imports(tree, pkg: str, top_only: bool) -> set[str]:
    """Modules imported by a module (top level only, or everywhere including function bodies)."""
    import ast

    out: set[str] = set()
    nodes = ast.walk(tree) if not top_only else _top_level(tree.body)
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)  # `from . import mod` imports a module
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.startswith("repcost")}


def _top_level(body):
    import ast

    for node in body:  # module body, and inside top-level if/try blocks; not inside functions or classes
        if isinstance(node, (ast.If, ast.Try)):
            yield from _top_level(node.body + node.orelse + getattr(node, "finalbody", [])
                                  + [n for h in getattr(node, "handlers", []) for n in h.body])
        else:
            yield node


def test_src_has_no_import_cycle_and_never_imports_cli():
    """Nothing under src/repcost imports repcost.cli (the library owns run identity); no import cycle, counting
    the imports inside functions and the packages a module's import runs."""
    import ast

    src = Path(__file__).resolve().parents[1] / "src" / "repcost"
    trees, pkgs = {}, {}
    for f in src.rglob("*.py"):
        mod = ".".join(f.relative_to(src.parent).with_suffix("").parts).removesuffix(".__init__")
        trees[mod] = ast.parse(f.read_text())
        pkgs[mod] = mod if f.name == "__init__.py" else mod.rpartition(".")[0]
    for mod, tree in trees.items():
        if not mod.startswith("repcost.cli"):
            bad = {d for d in _imports(tree, pkgs[mod], top_only=False) if d.startswith("repcost.cli")}
            assert not bad, (mod, bad)
    # every import counts, inside functions too (a function-level import only hides a cycle); importing a
    # module runs its packages' __init__ first, so those are edges as well. `from . import mod` also names the
    # package itself, which is already importing: not an edge
    def with_packages(d: str) -> set[str]:
        parts = d.split(".")
        return {".".join(parts[:i]) for i in range(2, len(parts) + 1)}

    edges = {m: {p for d in _imports(t, pkgs[m], top_only=False) for p in with_packages(d)
                 if p in trees and not m.startswith(p)}
             for m, t in trees.items()}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in edges[m]:
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path + [n]))
            if n not in state:
                visit(n, path + [n])
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])


@pytest.mark.slow  # several seconds of process starts and training
def test_a_run_made_by_earlier_code_is_still_recognised(tmp_path, run_cli):
    """tests/fixtures/legacy_run was made by repcost before run identity moved into the library: reused as is."""
    d = tmp_path / "legacy"
    shutil.copytree(FIXTURE, d)
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file() and p.suffix != ".log"}
    p = run_cli("repcost-train", "--resume", str(d), cwd=tmp_path)
    assert p.returncode == 0 and "already finished" in p.stdout, p.stderr
    p = run_cli("repcost-train", "model.width=8", "data.n_points=5", "train.phases.0.steps=20", "device=cpu",
                "train.phases.1.steps=20", f"hydra.run.dir={d}", cwd=tmp_path)
    assert p.returncode == 0 and "already finished" in p.stdout, p.stderr
    # nothing of the finished run was rewritten (train.log only gains the "already finished" lines)
    after = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file() and p.name != ".lock" and p.suffix != ".log"}
    assert before == after
