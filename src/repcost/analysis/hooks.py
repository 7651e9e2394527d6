"""The analyses selected by the `analysis/` config group, run during and after training.

Each analysis registers itself (`ANALYSES.register(name, OptionsDataclass)`) with a function
(model, x, options, data) -> Result of scalars (summary.json and metrics.jsonl), arrays
(analysis/<name>.npz) and tidy per-layer rows (analysis/layers.csv), plus a check of whether it
applies to the model and data (one that does not is listed under `not_applicable` with the reason; a
selection of which nothing applies is an error before training). Its options
are a dataclass: `analysis.options.*` is validated against the options of every registered
analysis before any work starts (`config.schema.validate_options`), so a misspelt option is one
line, exit 2. The certificate is one of them, run at the end of every finished run unless
`analysis.critical.enabled=false` (its options: `analysis.critical.*`).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch

from ..config.schema import AnalysisConfig, CriticalOptions, validate_options
from ..errors import RepcostError, check
from ..objective import training_targets
from ..registry import ANALYSES
from ..renamed import certificate_key
from ..rundir import atomic_write_bytes, csv_bytes
from .arrays import float64_model
from .critical import balance_summary, critical_point_certificate, layer_balance, not_applicable
from .family_costs import FAMILY_COSTS
from .spectra import hidden_spectra, jacobian_spectra, prop3_bound, rank_measures, schatten_cost, weight_spectra


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
    not_applicable: dict = field(default_factory=dict)  # summary key -> why the model does not support it


def _hidden(model, x, opts: HiddenOptions, ctx) -> Result:
    r = Result()
    for row in hidden_spectra(model, x, centred=opts.centred, which=opts.which, rel_tol=opts.rel_tol):
        at = f"{row['which']}{row['layer']}"
        r.arrays[f"s_{at}"] = row.pop("s")
        r.scalars[f"hidden.{at}.rank"] = row["numerical_rank"]  # numerical: s_i > rel_tol·s_1
        r.scalars[f"hidden.{at}.stable_rank"] = float(row["stable_rank"])
        r.scalars[f"hidden.{at}.entropy_rank"] = float(row["entropy_rank"])
        r.rows.append({"analysis": "hidden", **row})
    r.scalars["hidden.min_rank"] = min(row["numerical_rank"] for row in r.rows)  # the bottleneck rank
    return r


def _weights(model, x, opts: CommonOptions, ctx) -> Result:
    r = Result()
    for row in weight_spectra(model, rel_tol=opts.rel_tol):
        name = row["name"]
        r.arrays[name] = s = row.pop("s")
        if s.ndim == 1:
            r.scalars[f"weights.{name}.rank"] = int(row["numerical_rank"])
            r.rows.append({"analysis": "weights", **row})
        if name == "W_eff" and s.size > 1:
            r.scalars["weights.W_eff.s2_over_s1"] = float(s[1] / s[0]) if s[0] > 0 else 0.0
    return r


def _jacobian(model, x, opts: CommonOptions, ctx) -> Result:
    s = jacobian_spectra(model, x[: ctx.n_points])  # (points, r)
    ranks = rank_measures(s, opts.rel_tol)  # each an array over the points
    r = Result({"jacobian.rank_max": int(ranks["numerical_rank"].max()),
                "jacobian.rank_mean": float(ranks["numerical_rank"].mean()),
                "jacobian.schatten_cost_max": float(np.max(schatten_cost(s, model.depth)))}, {"jacobian_s": s})
    if model.structure.layer_rescaling:  # the proof's J f(x) = W_L D_{L−1}(x) ⋯ D_1(x) W_1 (Structure)
        r.scalars["jacobian.prop3_bound"] = prop3_bound(model)
    else:
        r.not_applicable["jacobian.prop3_bound"] = (f"the {model.family} family declares no layer rescaling "
                                                    "symmetry (Jacot 2023 Prop 3 bounds layered nets)")
    for m, v in ranks.items():  # per measure, over the points: mean, min, max
        r.scalars.update({f"jacobian.{m}_mean": float(v.mean()), f"jacobian.{m}_min": float(v.min()),
                          f"jacobian.{m}_max": float(v.max())})
    # one row per point: the Jacobian's own line in layers.csv
    r.rows = [{"analysis": "jacobian", "layer": "J", "point": i, "s1": float(si.max(initial=0.0)),
               **{m: v[i].item() for m, v in ranks.items()}} for i, si in enumerate(s)]
    return r


def _balance(model, x, opts: CommonOptions, ctx) -> Result:
    na = not_applicable(model)
    rows = ([] if "layer_gap" in na else
            [{"analysis": "balance", "layer": b.layer, "u": b.u, "v": b.v, "gap": b.gap} for b in layer_balance(model)])
    return Result({f"balance.{k}": v for k, v in balance_summary(model).items()}, {}, rows,
                  {f"balance.{k}": why for k, why in na.items()})


def _costs(model, x, opts: CommonOptions, ctx) -> Result:
    return Result(*FAMILY_COSTS[model.family](float64_model(model), ctx.data.x_train, ctx.data.y_train))


def _certificate(model, x, opts: CriticalOptions, ctx) -> Result:
    t, data = ctx.train, ctx.data
    y = training_targets(data, data.y_train, t.loss)  # as the objective sees them (one-hot for MSE classification)
    cert = critical_point_certificate(model, data.x_train, y, t.loss, t.lam, t.reg_scale, opts.stationarity_tol,
                                      opts.balance_tol, opts.descent_evals, opts.max_kinks)
    na, verdict = cert.pop("not_applicable", {}), cert.pop("critical_point")
    return Result({**{certificate_key(k): v for k, v in cert.items()}, "critical_point": verdict},
                  not_applicable={certificate_key(k): why for k, why in na.items()})


def describe_certificate(summary: dict) -> list[str]:
    """The certificate in a few lines for the CLI (docs/recipes-and-certificates.md says how to read it)."""
    if "critical_point" not in summary:
        return []
    clarke = ""
    if "critical.clarke_stationarity" in summary:
        c, n = summary["critical.clarke_stationarity"], summary["critical.kinks"]
        exact = summary.get("critical.clarke_exact")
        what = "" if exact is None else (" (the Clarke subdifferential)" if exact else " (an outer estimate of Clarke's)")
        clarke = (f", {c:.3g} over the slopes of {n} kinks of live units{what}" if math.isfinite(c)
                  else f", not computed over the slopes of {n} kinks: analysis.critical.max_kinks")
    gap = f", unit gap {summary['critical.unit_gap']:.3g}" if "critical.unit_gap" in summary else ""
    lines = [f"critical point: {'yes' if summary['critical_point'] else 'no'} (stationarity "
             f"{summary['critical.stationarity']:.3g}{clarke}{gap}; docs/recipes-and-certificates.md)"]
    if "certify.duality_gap_rel" in summary:
        lines.append(f"global minimum: the objective is at most {summary['certify.duality_gap_rel']:.3g} (relative) above "
                     "it (duality gap of the convex 1-D problem)")
        lines.append("  i.e. no two-layer net of any width reaches an objective more than that fraction below this one")
    if "critical.descent_rel" in summary:
        lines.append(f"descent check: L-BFGS lowers the objective by {summary['critical.descent_rel']:.3g} (relative) in "
                     f"{summary['critical.descent_evals']} evaluations")
    return lines


def _needs_scalar_output(model, data) -> Optional[str]:
    if model.family not in FAMILY_COSTS:
        return (f"the {model.family} family has no registered representation costs "
                "(analysis.family_costs.register_family_costs)")
    if data.d_out != 1:
        return f"needs a scalar output (d_out = 1), got d_out = {data.d_out}"
    return None


@dataclass(frozen=True)
class Analysis:
    fn: Callable
    applies: Callable  # (model, data) -> None, or why it does not apply
    cheap: bool = True  # cheap enough to run every k steps
    describe: Optional[Callable[[dict], list[str]]] = None  # summary -> lines the CLI prints after a run


def register_analysis(name: str, options: type, fn: Callable, applies: Optional[Callable] = None,
                      cheap: bool = True, describe: Optional[Callable[[dict], list[str]]] = None) -> None:
    """Register an analysis (also from a plugin): `fn(model, x, options, ctx) -> Result` (ctx: the `AnalysisRunner`),
    options a dataclass; `describe(summary)` gives the lines `repcost-train` prints about it after a run."""
    ANALYSES.register(name, options)(Analysis(fn, applies or (lambda model, data: None), cheap, describe))


def descriptions(summary: dict) -> list[str]:
    """Every registered analysis's lines about a run's summary."""
    return [line for n in ANALYSES.names() if (d := ANALYSES.get(n).build.describe) for line in d(summary)]


register_analysis("hidden", HiddenOptions, _hidden)
register_analysis("weights", CommonOptions, _weights)
register_analysis("jacobian", CommonOptions, _jacobian)
register_analysis("balance", CommonOptions, _balance)
register_analysis("costs", CommonOptions, _costs, _needs_scalar_output, cheap=False)
register_analysis("critical", CriticalOptions, _certificate, cheap=False, describe=describe_certificate)


def analysis_points(cfg: AnalysisConfig, data) -> torch.Tensor:
    """The inputs analyses run on: the train split (default), the test split, or fresh points."""
    if (cfg.options or {}).get("points", "train") == "train":  # else test (validate_options allows no other)
        return data.x_train
    if data.x_test is None:
        raise RepcostError(f"analysis.options.points=test but data={data.name} has no test split")
    return data.x_test


class AnalysisRunner:
    """Periodic scalars into metrics.jsonl; final scalars into summary.json, arrays into analysis/. It is the `ctx`
    every analysis receives: what an analysis may read beside the model and its points is its `data`, `n_points` and
    `train` (the run's TrainConfig: loss, λ, s; None outside training)."""

    def __init__(self, cfg: AnalysisConfig, model, data, run_dir: Path, train=None):
        self.cfg, self.run_dir = cfg, Path(run_dir)
        built = validate_options(cfg)
        self.skipped = {n: why for n in cfg.analyses if (why := ANALYSES.get(n).build.applies(model, data))}
        if self.skipped and len(self.skipped) == len(cfg.analyses):  # nothing selected applies: a mistake
            name, why = next(iter(self.skipped.items()))
            raise RepcostError(f"analysis '{name}' does not apply to this run: {why}")
        self.names = [n for n in cfg.analyses if n not in self.skipped]
        self.x = analysis_points(cfg, data) if cfg.analyses else None
        self.options = {**{n: built.get(ANALYSES.get(n).schema) for n in self.names}, "critical": cfg.critical}
        self.critical = cfg.critical.enabled and train is not None
        self.data, self.n_points, self.train = data, cfg.n_points, train

    def _run(self, model, names) -> Result:
        out = Result()
        for name in names:
            r = ANALYSES.get(name).build.fn(model, self.x, self.options[name], self)
            out.scalars.update(r.scalars)
            if r.arrays:  # one analysis/<name>.npz each
                out.arrays[name] = r.arrays
            out.rows += r.rows
            out.not_applicable.update(r.not_applicable)
        return out

    def periodic(self, model, step: int) -> dict:
        """Scalars of the selected cheap analyses at a training step."""
        return self._run(model, [n for n in self.names if ANALYSES.get(n).build.cheap]).scalars

    def final(self, model) -> dict:
        """The certificate and every selected analysis that applies; writes analysis/*.npz and analysis/layers.csv;
        returns the scalars (with `not_applicable`: the analyses and terms that do not apply to the run, and why)."""
        names = ["critical"] if self.critical else []
        if self.cfg.at_end:
            names += [n for n in self.names if n not in names]  # `critical` listed in `analyses` too: once
        r = self._run(model, names)
        if self.cfg.at_end:
            r.not_applicable.update(self.skipped)
        out_dir = self.run_dir / "analysis"
        for name, arrays in r.arrays.items():
            buf = io.BytesIO()
            np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
            atomic_write_bytes(out_dir / f"{name}.npz", buf.getvalue())
        if r.rows:
            atomic_write_bytes(out_dir / "layers.csv", csv_bytes(r.rows))
        return {**r.scalars, **({"not_applicable": r.not_applicable} if r.not_applicable else {})}
