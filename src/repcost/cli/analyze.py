"""`repcost-analyze RUN_DIR [overrides]`: recompute analyses from a saved checkpoint, no training.

Overrides use the train CLI's syntax: a group choice (`analysis=spectra`) or a dotted key
(`analysis.n_points=50`, `analysis.options.points=test`, `data.seed=7` for fresh points drawn
from the same dataset), before or after the options. Results go to a new RUN_DIR/reanalysis/<time>/analysis/
(or `--out DIR`: outside the run, or under RUN_DIR/reanalysis/) and are printed: the run's own files are never
rewritten, so its training-time analysis/ keeps matching summary.json.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from omegaconf import OmegaConf

from ..analysis.hooks import AnalysisRunner
from ..config.messages import clean_exit
from ..api import load_run
from ..config import validate
from ..config.compose import check_config_dirs, compose_config
from ..data import load_data
from ..errors import OneLineParser, RepcostError
from ..provenance import provenance
from ..rundir import atomic_write_json, is_run_dir, unused_path

GROUPS = ("model", "data", "train", "analysis")
REANALYSIS = "reanalysis"  # RUN_DIR/reanalysis/: the only place inside a run directory repcost-analyze writes to


def apply_overrides(cfg, overrides: list[str], config_dirs: list[Path] = ()):
    """The run's saved config (a DictConfig, its sections replaced in place) with group choices (k=option, composed
    as repcost-train composes them, `config_dirs` searched first; `analysis=spectra` for a run that analysed nothing)
    and then the dotted keys applied."""
    for o in overrides:
        if "=" not in o:
            raise RepcostError(f"override {o!r} is not key=value")
    groups = [o for o in overrides if o.partition("=")[0] in GROUPS]
    if cfg.analysis.name == "none" and not cfg.analysis.analyses and not any(o.startswith("analysis=") for o in groups):
        groups.append("analysis=spectra")  # a sensible default, then the overrides
    composed = compose_config(groups, config_dirs) if groups else {}
    for o in groups:
        cfg[o.partition("=")[0]] = composed[o.partition("=")[0]]
    return OmegaConf.merge(cfg, OmegaConf.from_dotlist([o for o in overrides if o not in groups]))


def analyze(run_dir: Path, overrides: list[str], out_dir: Path | None = None,
            config_dirs: list[Path] = ()) -> tuple[dict, Path]:
    """Rebuild the run's model from its checkpoint and run the configured analyses; (scalars, their analysis/ folder).

    Results go to `out_dir`/analysis/ (default: a new RUN_DIR/reanalysis/<time>/); an `out_dir` inside a run
    directory other than under its reanalysis/ is refused, so training-time files are never rewritten. Its
    summary.json records what a run's does of what made it: the provenance, the full config used, the overrides
    and the analysed run's identity hash.
    """
    run = load_run(run_dir)  # (its checkpoint is read below: a run that saved none is one line naming it)
    fresh = run.path / REANALYSIS / time.strftime("%Y%m%d-%H%M%S")  # a new folder: no earlier result overwritten
    target = check_out(Path(out_dir)) if out_dir else unused_path(fresh)
    cfg = apply_overrides(OmegaConf.create(run.config), overrides, check_config_dirs(config_dirs, "--config-dir"))
    cfg.device = "cpu"  # the analyses run on the CPU, whatever device the run trained on
    spec = validate(cfg)
    data = load_data(spec.data)
    model = run.model(spec.torch_dtype, spec=spec, data=data)
    data = data.to(spec.torch_dtype, "cpu")
    scalars = AnalysisRunner(spec.analysis, model, data, target).final(model)
    record = {"overrides": overrides, "run_dir": str(run.path.resolve()), "run_config_hash": run.checkpoint["config_hash"],
              **provenance(), "config": OmegaConf.to_container(cfg, resolve=True)}
    atomic_write_json(target / "analysis" / "summary.json", {**record, **scalars})
    return scalars, target / "analysis"


def check_out(out: Path) -> Path:
    """`out` if writing analysis/ there cannot touch a run's own files: outside every run directory, or under
    that run's reanalysis/; a RepcostError otherwise."""
    resolved = out.resolve()
    if resolved.exists() and not resolved.is_dir():
        raise RepcostError(f"--out {out} is a file; give a directory (analysis/ is written inside it)")
    run = next((d for d in (resolved, *resolved.parents) if is_run_dir(d)), None)  # the nearest run at or above
    if run is not None and not resolved.is_relative_to(run / REANALYSIS):
        raise RepcostError(f"--out {out} is inside the run directory {run}, whose own files are never rewritten; "
                           f"use {run / REANALYSIS}/<name> (the default is a new one) or a directory outside the run")
    return out


def main(argv: list[str] | None = None) -> None:
    """Console entry point for repcost-analyze."""
    ap = OneLineParser(prog="repcost-analyze", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("overrides", nargs="*", help="e.g. analysis=spectra analysis.options.points=test")
    ap.add_argument("--out", type=Path, default=None,
                    help="write analysis/ here instead of a new RUN_DIR/reanalysis/<time>/ (inside a run directory: "
                         "only under its reanalysis/)")
    ap.add_argument("--config-dir", type=Path, action="append", default=[], metavar="DIR",
                    help="a config dir of your own (as for repcost-train), searched first for group options")
    a = ap.parse_intermixed_args(argv)  # overrides before or after the options
    with clean_exit("repcost-analyze"):  # (a bad dotted override is an omegaconf error)
        scalars, out = analyze(a.run_dir, a.overrides, a.out, a.config_dir)
    print(json.dumps(scalars, indent=1, sort_keys=True))
    print(f"arrays and per-layer table: {out}")


if __name__ == "__main__":
    main()
