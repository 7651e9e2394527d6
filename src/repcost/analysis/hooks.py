"""Runs the analyses selected by the `analysis/` config group during and after training.

Each analysis is a function (model, x, options) -> Result of scalars (summary.json and
metrics.jsonl), arrays (analysis/<name>.npz) and tidy per-layer rows (analysis/layers.csv),
plus a check of whether it applies to the model (an analysis that does not apply is an error).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch

from ..config.schema import AnalysisConfig
from ..errors import RepcostError
from ..runio import atomic_write_bytes, csv_bytes
from ..models.base import RepModel
from .arrays import float64_model
from .balance import balance_summary, layer_balance
from .jacobians import jacobian_rank_measures, jacobian_spectra, prop3_bound, schatten_cost
from .spectra import hidden_spectra, weight_spectra


@dataclass
class Result:
    scalars: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)
    rows: list = field(default_factory=list)


def _hidden(model, x, opts) -> Result:
    r = Result()
    specs = hidden_spectra(model, x, centred=opts.get("centred", True), which=opts.get("which", "post"),
                           rel_tol=opts.get("rel_tol", 1e-3))
    for sp in specs:
        r.scalars[f"hidden.{sp.which}{sp.layer}.rank"] = sp.numerical_rank
        r.arrays[f"s_{sp.which}{sp.layer}"] = sp.s
        r.rows.append({"analysis": "hidden", **sp.row()})
    r.scalars["hidden.min_rank"] = min(sp.numerical_rank for sp in specs)  # the bottleneck rank
    return r


def _weights(model, x, opts) -> Result:
    r = Result()
    for ws in weight_spectra(model, rel_tol=opts.get("rel_tol", 1e-3)):
        r.arrays[ws.name] = ws.s
        if ws.s.ndim == 1:
            r.scalars[f"weights.{ws.name}.rank"] = int(ws.numerical_rank)
            r.rows.append({"analysis": "weights", "layer": ws.layer if ws.layer is not None else "eff",
                           "name": ws.name, "s1": float(ws.s[0]), "numerical_rank": int(ws.numerical_rank),
                           "stable_rank": float(ws.stable_rank), "entropy_rank": float(ws.entropy_rank)})
        if ws.name == "W_eff" and ws.s.size > 1:
            r.scalars["weights.W_eff.s2_over_s1"] = float(ws.s[1] / ws.s[0]) if ws.s[0] > 0 else 0.0
    return r


def _jacobian(model, x, opts) -> Result:
    s = jacobian_spectra(model, x[: opts.get("n_points", 10)])
    ranks = jacobian_rank_measures(s, opts.get("rel_tol", 1e-3))
    sc = np.atleast_1d(schatten_cost(s, model.depth))
    return Result({"jacobian.rank_max": int(np.max(ranks["numerical_rank"])),
                   "jacobian.rank_mean": float(np.mean(ranks["numerical_rank"])),
                   "jacobian.schatten_cost_max": float(sc.max()), "jacobian.prop3_bound": prop3_bound(model)},
                  {"jacobian_s": s})


def _balance(model, x, opts) -> Result:
    rows = [{"analysis": "balance", "layer": b.layer, "u": b.u, "v": b.v, "gap": b.gap} for b in layer_balance(model)]
    return Result({f"balance.{k}": v for k, v in balance_summary(model).items()}, {}, rows)


def _costs(model, x, opts, data=None) -> Result:
    scalars, arrays = float64_model(model).family_costs(data.x_train, data.y_train)
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


ANALYSES = {
    "hidden": Analysis(_hidden),
    "weights": Analysis(_weights),
    "jacobian": Analysis(_jacobian),
    "balance": Analysis(_balance),
    "costs": Analysis(_costs, _needs_scalar_output, cheap=False),
}


def analysis_points(cfg: AnalysisConfig, data) -> torch.Tensor:
    """The inputs analyses run on: the train split (default), the test split, or fresh points."""
    where = cfg.options.get("points", "train") if cfg.options else "train"
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
        for name in cfg.analyses:
            if name not in ANALYSES:
                raise RepcostError(f"invalid config: analysis.analyses contains {name!r}; allowed: "
                                   + ", ".join(ANALYSES))
            why = ANALYSES[name].applies(model, data)
            if why:
                raise RepcostError(f"analysis '{name}' does not apply to this run: {why}")
        self.x = analysis_points(cfg, data) if cfg.analyses else None
        self.opts = {"n_points": cfg.n_points, **(dict(cfg.options) if cfg.options else {})}

    @property
    def enabled_periodic(self) -> bool:
        """Whether any analysis runs during training."""
        return bool(self.cfg.analyses) and self.cfg.every > 0

    def _run(self, model, names) -> Result:
        out = Result()
        for name in names:
            a = ANALYSES[name]
            r = a.fn(model, self.x, self.opts, self.data) if name == "costs" else a.fn(model, self.x, self.opts)
            out.scalars.update(r.scalars)
            out.arrays.update({f"{name}/{k}": v for k, v in r.arrays.items()})
            out.rows += r.rows
        return out

    def periodic(self, model, step: int) -> dict:
        """Scalars of the selected cheap analyses at a training step."""
        return self._run(model, [n for n in self.cfg.analyses if ANALYSES[n].cheap]).scalars

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
