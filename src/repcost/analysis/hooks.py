"""The analyses selected by the `analysis/` config group, run during and after training.

Each analysis registers itself (`ANALYSES.register(name, OptionsDataclass)`) with a function
(model, x, options, data) -> Result of scalars (summary.json and metrics.jsonl), arrays
(analysis/<name>.npz) and tidy per-layer rows (analysis/layers.csv), plus a check of whether it
applies to the model (an analysis that does not apply is an error before training). Its options
are a dataclass: `analysis.options.*` is validated against the options of every registered
analysis before any work starts (`validate_options`), so a misspelt option is one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch
from omegaconf import OmegaConf

from ..config.schema import AnalysisConfig
from ..errors import ConfigError, RepcostError, check
from ..models.base import RepModel
from ..registry import ANALYSES
from ..runio import atomic_write_bytes, csv_bytes
from .arrays import float64_model
from .balance import balance_summary, layer_balance
from .jacobians import jacobian_rank_measures, jacobian_spectra, prop3_bound, schatten_cost
from .spectra import hidden_spectra, weight_spectra


# -- options ---------------------------------------------------------------------------------------
@dataclass
class CommonOptions:
    """Options every analysis reads."""

    points: str = "train"  # train | test: the inputs analyses run on
    rel_tol: float = 1e-3  # numerical rank: s_i > rel_tol · s_1

    def __post_init__(self):
        check(self.points in ("train", "test"), "points", self.points, "train or test")
        check(0 < self.rel_tol < 1, "rel_tol", self.rel_tol, "a relative tolerance in (0, 1)")


@dataclass
class HiddenOptions(CommonOptions):
    centred: bool = True  # centre representations over the samples (as Jacot 2023)
    which: str = "post"  # pre | post | both (nonlinearity)

    def __post_init__(self):
        super().__post_init__()
        check(self.which in ("pre", "post", "both"), "which", self.which, "pre, post or both")


@dataclass
class Result:
    scalars: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)
    rows: list = field(default_factory=list)


def _hidden(model, x, opts: HiddenOptions, ctx) -> Result:
    r = Result()
    specs = hidden_spectra(model, x, centred=opts.centred, which=opts.which, rel_tol=opts.rel_tol)
    for sp in specs:
        r.scalars[f"hidden.{sp.which}{sp.layer}.rank"] = sp.numerical_rank  # numerical: s_i > rel_tol·s_1
        r.scalars[f"hidden.{sp.which}{sp.layer}.stable_rank"] = float(sp.stable_rank)
        r.scalars[f"hidden.{sp.which}{sp.layer}.entropy_rank"] = float(sp.entropy_rank)
        r.arrays[f"s_{sp.which}{sp.layer}"] = sp.s
        r.rows.append({"analysis": "hidden", **sp.row()})
    r.scalars["hidden.min_rank"] = min(sp.numerical_rank for sp in specs)  # the bottleneck rank
    return r


def _weights(model, x, opts: CommonOptions, ctx) -> Result:
    r = Result()
    for ws in weight_spectra(model, rel_tol=opts.rel_tol):
        r.arrays[ws.name] = ws.s
        if ws.s.ndim == 1:
            r.scalars[f"weights.{ws.name}.rank"] = int(ws.numerical_rank)
            r.rows.append({"analysis": "weights", "layer": ws.layer if ws.layer is not None else "eff",
                           "name": ws.name, "s1": float(ws.s[0]), "numerical_rank": int(ws.numerical_rank),
                           "stable_rank": float(ws.stable_rank), "entropy_rank": float(ws.entropy_rank)})
        if ws.name == "W_eff" and ws.s.size > 1:
            r.scalars["weights.W_eff.s2_over_s1"] = float(ws.s[1] / ws.s[0]) if ws.s[0] > 0 else 0.0
    return r


def _jacobian(model, x, opts: CommonOptions, ctx) -> Result:
    s = jacobian_spectra(model, x[: ctx.n_points])
    ranks = jacobian_rank_measures(s, opts.rel_tol)
    sc = np.atleast_1d(schatten_cost(s, model.depth))
    r = Result({"jacobian.rank_max": int(np.max(ranks["numerical_rank"])),
                "jacobian.rank_mean": float(np.mean(ranks["numerical_rank"])),
                "jacobian.schatten_cost_max": float(sc.max()), "jacobian.prop3_bound": prop3_bound(model)},
               {"jacobian_s": s})
    for measure in ("numerical_rank", "stable_rank", "entropy_rank"):  # over the points: mean, min, max
        v = np.atleast_1d(np.asarray(ranks[measure], dtype=float))
        r.scalars.update({f"jacobian.{measure}_mean": float(v.mean()), f"jacobian.{measure}_min": float(v.min()),
                          f"jacobian.{measure}_max": float(v.max())})
    for i, si in enumerate(np.atleast_2d(s)):  # one row per point: the Jacobian's own line in layers.csv
        r.rows.append({"analysis": "jacobian", "layer": "J", "point": i, "s1": float(si[0]) if si.size else 0.0,
                       "numerical_rank": int(np.atleast_1d(ranks["numerical_rank"])[i]),
                       "stable_rank": float(np.atleast_1d(ranks["stable_rank"])[i]),
                       "entropy_rank": float(np.atleast_1d(ranks["entropy_rank"])[i])})
    return r


def _balance(model, x, opts: CommonOptions, ctx) -> Result:
    rows = [{"analysis": "balance", "layer": b.layer, "u": b.u, "v": b.v, "gap": b.gap} for b in layer_balance(model)]
    return Result({f"balance.{k}": v for k, v in balance_summary(model).items()}, {}, rows)


def _costs(model, x, opts: CommonOptions, ctx) -> Result:
    scalars, arrays = float64_model(model).family_costs(ctx.data.x_train, ctx.data.y_train)
    return Result(scalars, arrays)


def _needs_scalar_output(model, data) -> Optional[str]:
    if type(model).family_costs is RepModel.family_costs:
        return f"the {model.family} family defines no representation costs (RepModel.family_costs)"
    if data.d_out != 1:
        return f"needs a scalar output (d_out = 1), got d_out = {data.d_out}"
    return None


@dataclass(frozen=True)
class Analysis:
    fn: Callable
    applies: Callable = lambda model, data: None  # -> None, or why it does not apply
    cheap: bool = True  # cheap enough to run every k steps


@dataclass(frozen=True)
class AnalysisContext:
    """What an analysis may read beside the model and its points."""

    data: Any
    n_points: int


def register_analysis(name: str, options: type, fn: Callable, applies: Optional[Callable] = None,
                      cheap: bool = True) -> None:
    """Register an analysis (also from a plugin): `fn(model, x, options, ctx) -> Result`, options a dataclass."""
    ANALYSES.register(name, options)(Analysis(fn, applies or (lambda model, data: None), cheap))


register_analysis("hidden", HiddenOptions, _hidden)
register_analysis("weights", CommonOptions, _weights)
register_analysis("jacobian", CommonOptions, _jacobian)
register_analysis("balance", CommonOptions, _balance)
register_analysis("costs", CommonOptions, _costs, _needs_scalar_output, cheap=False)


def validate_options(cfg: AnalysisConfig) -> dict[str, Any]:
    """Check `analysis.analyses` and `analysis.options` against the registered analyses; the options with defaults.

    Keys are checked against the options of every registered analysis (so one options block can
    serve several presets); values against each analysis's dataclass.
    """
    names = ANALYSES.names()
    for name in cfg.analyses:
        check(name in names, "analysis.analyses", name, "a list of " + ", ".join(names))
    schemas = {ANALYSES.get(n).schema for n in names}
    known = {f.name: f for s in schemas for f in dataclasses.fields(s)}
    given = dict(cfg.options or {})
    for key in given:
        check(key in known, f"analysis.options.{key}", "<unknown option>", "options " + ", ".join(sorted(known)))
    for schema in schemas:
        mine = {k: v for k, v in given.items() if k in {f.name for f in dataclasses.fields(schema)}}
        try:
            OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), mine))
        except ConfigError as e:
            raise e.with_prefix("analysis.options") from None
        except Exception as e:  # a wrong type (OmegaConf's validation)
            key = getattr(e, "full_key", None) or getattr(e, "key", "?")
            raise ConfigError(f"analysis.options.{key}", getattr(e, "value", None), str(e).splitlines()[0]) from None
    defaults = {k: f.default for k, f in known.items()}
    return {**defaults, **given}


def _options(schema: type, opts: dict[str, Any]):
    return schema(**{f.name: opts[f.name] for f in dataclasses.fields(schema) if f.name in opts})


def analysis_points(cfg: AnalysisConfig, data) -> torch.Tensor:
    """The inputs analyses run on: the train split (default), the test split, or fresh points."""
    where = (cfg.options or {}).get("points", "train")
    if where == "train":
        return data.x_train
    if where == "test":
        if not data.has_test:
            raise RepcostError(f"analysis.options.points=test but data={data.name} has no test split")
        return data.x_test
    raise RepcostError(f"analysis.options.points={where!r}; allowed: train, test")


class AnalysisRunner:
    """Periodic scalars into metrics.jsonl; final scalars into summary.json, arrays into analysis/."""

    def __init__(self, cfg: AnalysisConfig, model, data, run_dir: Path):
        self.cfg, self.data, self.run_dir = cfg, data, Path(run_dir)
        opts = validate_options(cfg)
        for name in cfg.analyses:
            why = ANALYSES.get(name).build.applies(model, data)
            if why:
                raise RepcostError(f"analysis '{name}' does not apply to this run: {why}")
        self.x = analysis_points(cfg, data) if cfg.analyses else None
        self.options = {n: _options(ANALYSES.get(n).schema, opts) for n in cfg.analyses}
        self.ctx = AnalysisContext(data, cfg.n_points)

    @property
    def enabled_periodic(self) -> bool:
        """Whether any analysis runs during training."""
        return bool(self.cfg.analyses) and self.cfg.every > 0

    def _run(self, model, names) -> Result:
        out = Result()
        for name in names:
            r = ANALYSES.get(name).build.fn(model, self.x, self.options[name], self.ctx)
            out.scalars.update(r.scalars)
            out.arrays.update({f"{name}/{k}": v for k, v in r.arrays.items()})
            out.rows += r.rows
        return out

    def periodic(self, model, step: int) -> dict:
        """Scalars of the selected cheap analyses at a training step."""
        return self._run(model, [n for n in self.cfg.analyses if ANALYSES.get(n).build.cheap]).scalars

    def final(self, model) -> dict:
        """Run every selected analysis; write analysis/*.npz and analysis/layers.csv; return the scalars."""
        if not self.cfg.analyses or not self.cfg.at_end:
            return {}
        r = self._run(model, self.cfg.analyses)
        out_dir = self.run_dir / "analysis"
        by_name: dict[str, dict] = {}
        for key, arr in r.arrays.items():
            name, _, k = key.partition("/")
            by_name.setdefault(name, {})[k] = np.asarray(arr)
        for name, arrays in by_name.items():
            buf = io.BytesIO()
            np.savez(buf, **arrays)
            atomic_write_bytes(out_dir / f"{name}.npz", buf.getvalue())
        if r.rows:
            atomic_write_bytes(out_dir / "layers.csv", csv_bytes(r.rows))
        return r.scalars
