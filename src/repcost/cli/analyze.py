"""`repcost-analyze RUN_DIR [overrides]`: recompute analyses from a saved checkpoint, no training.

Overrides use the train CLI's syntax: a group choice (`analysis=spectra`) or a dotted key
(`analysis.n_points=50`, `analysis.options.points=test`, `data.seed=7` for fresh points drawn
from the same dataset). Results go to a new RUN_DIR/reanalysis/<time>/analysis/ (or `--out DIR`) and are
printed: the run's own training-time analysis/ files are never rewritten, so they keep matching summary.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from omegaconf import OmegaConf

from ..analysis.hooks import AnalysisRunner
from .hydra_errors import OneLineParser
from ..config import validate
from ..data import load_data
from ..errors import RepcostError
from ..models import build_model
from ..paths import CONFIG_DIR
from ..runio import atomic_write_json
from ..rundir import CHECKPOINT, load_checkpoint

GROUPS = ("model", "data", "train", "analysis")


def _group_file(key: str, value: str, config_dirs: list[Path]) -> Path:
    """`key/value.yaml` from the first of the user's config dirs, then repcost's own, that has it."""
    dirs = [*config_dirs, CONFIG_DIR]
    for d in dirs:
        if (d / key / f"{value}.yaml").exists():
            return d / key / f"{value}.yaml"
    opts = ", ".join(sorted({p.stem for d in dirs for p in (d / key).glob("*.yaml")}))
    raise RepcostError(f"unknown {key} '{value}'; allowed: {opts}")


def apply_overrides(cfg, overrides: list[str], config_dirs: list[Path] = ()):
    """The run's saved config with group choices (k=option, searched in `config_dirs` first) and dotted keys applied."""
    cfg = OmegaConf.create(OmegaConf.to_container(cfg))
    for o in overrides:
        key, eq, value = o.partition("=")
        if not eq:
            raise RepcostError(f"override {o!r} is not key=value")
        if key in GROUPS:
            path = _group_file(key, value, [Path(d) for d in config_dirs])
            if key == "model" and cfg.model.name != value:
                raise RepcostError(f"model={value}: the checkpoint holds a {cfg.model.name} model")
            cfg[key] = OmegaConf.load(path)
        else:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist([o]))
    return cfg


def analyze(run_dir: Path, overrides: list[str], out_dir: Path | None = None, config_dirs: list[Path] = ()) -> dict:
    """Rebuild the run's model from checkpoint.pt and run the configured analyses; returns the scalars."""
    run_dir = Path(run_dir)
    cfg_path, ckpt_path = run_dir / ".hydra" / "config.yaml", run_dir / CHECKPOINT
    if not cfg_path.exists() or not ckpt_path.exists():
        raise RepcostError(f"{run_dir} is not a repcost run directory (needs .hydra/config.yaml and {CHECKPOINT})")
    cfg = OmegaConf.load(cfg_path)
    if cfg.analysis.name == "none" and not cfg.analysis.analyses and not any(o.startswith("analysis=") for o in overrides):
        cfg.analysis = OmegaConf.load(CONFIG_DIR / "analysis" / "spectra.yaml")  # a sensible default, then the overrides
    cfg = apply_overrides(cfg, overrides, config_dirs)
    spec = validate(cfg)
    ckpt = load_checkpoint(ckpt_path)
    if ckpt.get("family") != spec.model.name:
        raise RepcostError(f"{ckpt_path} holds a {ckpt.get('family')} model, the config a {spec.model.name} model")
    data = load_data(spec.data)
    model = build_model(spec.model, data.d_in, data.d_out, spec.seed).to(spec.torch_dtype)
    try:
        model.load_state_dict(ckpt["trainer"]["model"])
    except RuntimeError as e:
        raise RepcostError(f"{ckpt_path} does not fit the configured model: {str(e).splitlines()[0]}") from None
    data = data.to(spec.torch_dtype, "cpu")
    target = Path(out_dir) if out_dir else _new_reanalysis_dir(run_dir)
    scalars = AnalysisRunner(spec.analysis, model, data, target).final(model)
    atomic_write_json(target / "analysis" / "summary.json", {"overrides": overrides, **scalars})
    return scalars


def _new_reanalysis_dir(run_dir: Path) -> Path:
    """RUN_DIR/reanalysis/<time>[-n]: a fresh folder, so no earlier result is overwritten."""
    import time

    base = run_dir / "reanalysis" / time.strftime("%Y%m%d-%H%M%S")
    target, n = base, 1
    while target.exists():
        target, n = base.with_name(f"{base.name}-{n}"), n + 1
    return target


def main(argv: list[str] | None = None) -> None:
    """Console entry point for repcost-analyze."""
    ap = OneLineParser(prog="repcost-analyze", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("overrides", nargs="*", help="e.g. analysis=spectra analysis.options.points=test")
    ap.add_argument("--out", type=Path, default=None,
                    help="write analysis/ here instead of a new RUN_DIR/reanalysis/<time>/")
    ap.add_argument("--config-dir", type=Path, action="append", default=[], metavar="DIR",
                    help="a config dir of your own (as for repcost-train), searched first for group options")
    a = ap.parse_args(argv)
    try:
        out = a.out or _new_reanalysis_dir(a.run_dir)
        scalars = analyze(a.run_dir, a.overrides, out, a.config_dir)
    except RepcostError as e:
        print(f"repcost-analyze: error: {e}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # omegaconf errors from a bad dotted override
        from .hydra_errors import one_line
        from omegaconf.errors import OmegaConfBaseException
        if isinstance(e, OmegaConfBaseException):
            print(f"repcost-analyze: error: {one_line(e)}", file=sys.stderr)
            sys.exit(2)
        raise
    print(json.dumps(scalars, indent=1, sort_keys=True))
    print(f"arrays and per-layer table: {out / 'analysis'}")


if __name__ == "__main__":
    main()
