"""The notebook API: `load_run(dir)` gives a run's config, summary, metrics, analysis arrays, model and data;
`load_sweep(dir)` gives a sweep's rows (runs.csv, numbers parsed).

Everything is read lazily from the run directory, so loading a run is cheap until its model or data is asked for.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .errors import RepcostError

from .rundir import CHECKPOINT, METRICS, SUMMARY


def parse_value(text: str) -> Any:
    """A CSV cell as int, float, bool or None where it reads as one, else the string itself."""
    if text == "":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return {"True": True, "False": False, "true": True, "false": False}.get(text, text)


def read_csv(path: Path) -> list[dict]:
    """Rows of a CSV file as dicts with numbers parsed."""
    with open(path, newline="") as fh:
        return [{k: parse_value(v) for k, v in row.items()} for row in csv.DictReader(fh)]


@dataclass
class Run:
    """A run directory (or an ensemble member's directory) of repcost-train."""

    path: Path
    _model_cache: dict = field(default_factory=dict, repr=False)

    @cached_property
    def config(self) -> dict:
        """The resolved run config: .hydra/config.yaml, or the checkpoint's copy (ensemble members have no .hydra)."""
        from omegaconf import OmegaConf

        saved = self.path / ".hydra" / "config.yaml"
        if saved.exists():
            return OmegaConf.to_container(OmegaConf.load(saved), resolve=True)
        if (self.path / CHECKPOINT).exists():
            return dict(self.checkpoint["config"])
        raise RepcostError(f"{self.path}: no .hydra/config.yaml nor {CHECKPOINT}: not a repcost run directory")

    @cached_property
    def summary(self) -> dict:
        """summary.json: final losses, norms, costs, analysis scalars, status."""
        f = self.path / SUMMARY
        if not f.exists():
            raise RepcostError(f"{f} not found: the run has not ended (or this is not a run directory)")
        return json.loads(f.read_text())

    @cached_property
    def metrics(self) -> list[dict]:
        """metrics.jsonl: one dict per logged step (step, phase, lr, objective, losses, …)."""
        f = self.path / METRICS
        if not f.exists():
            return []
        return [json.loads(line) for line in f.read_text().splitlines() if line.strip()]

    def metric(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of one logged metric, for a quick `plt.plot(*run.metric("objective"))`."""
        recs = [r for r in self.metrics if key in r]
        if not recs:
            keys = sorted({k for r in self.metrics for k in r})
            raise RepcostError(f"metric {key!r} not logged in {self.path}; logged: {', '.join(keys) or '(none)'}")
        return np.array([r["step"] for r in recs]), np.array([r[key] for r in recs], dtype=float)

    @cached_property
    def analysis(self) -> dict[str, dict[str, np.ndarray]]:
        """analysis/<name>.npz as {name: {array name: array}} (e.g. run.analysis["jacobian"])."""
        out = {}
        for f in sorted((self.path / "analysis").glob("*.npz")):
            with np.load(f) as z:
                out[f.stem] = {k: z[k] for k in z.files}
        return out

    @cached_property
    def layers(self) -> list[dict]:
        """analysis/layers.csv (the per-layer table: ranks, norms), numbers parsed; [] if absent."""
        f = self.path / "analysis" / "layers.csv"
        return read_csv(f) if f.exists() else []

    @cached_property
    def checkpoint(self) -> dict:
        """checkpoint.pt as saved (plain tensors and containers)."""
        from .rundir import load_checkpoint

        f = self.path / CHECKPOINT
        if not f.exists():
            raise RepcostError(f"{f} not found: the run saved no checkpoint")
        return load_checkpoint(f)

    @cached_property
    def spec(self):
        """The validated RunSpec of the config (plugins named by the config are imported)."""
        from omegaconf import OmegaConf

        from .config import validate

        cfg = {k: v for k, v in self.config.items() if k != "hydra"}
        cfg["device"] = "cpu"  # a notebook reloads on the CPU whatever the run trained on
        return validate(OmegaConf.create(cfg))

    def data(self):
        """The run's dataset (a DataBundle: x_train, y_train, x_test, y_test, meta), rebuilt from its config."""
        from .data import load_data

        return load_data(self.spec.data)

    def model(self, dtype: str = "float64"):
        """The trained model from checkpoint.pt, in `dtype` (float64 by default, as analyses use), in eval mode."""
        import torch

        from .models import build_model

        if dtype not in self._model_cache:
            spec = self.spec
            data = self.data()
            model = build_model(spec.model, data.d_in, data.d_out, spec.seed)
            state = self.checkpoint["trainer"]["model"]
            try:
                model.load_state_dict(state)
            except RuntimeError as e:
                raise RepcostError(f"{self.path / CHECKPOINT} does not fit the configured model: "
                                   f"{str(e).splitlines()[0]}") from None
            self._model_cache[dtype] = model.to(getattr(torch, dtype)).eval()
        return self._model_cache[dtype]

    def members(self) -> list[Run]:
        """The members of a `train.ensemble_size=K` run (members/<i>/), each a Run; [] for a single run."""
        d = self.path / "members"
        if not d.is_dir():
            return []
        return [Run(p) for p in sorted(d.iterdir(), key=lambda p: int(p.name)) if p.name.isdigit()]

    def __repr__(self) -> str:
        s = self.summary if (self.path / SUMMARY).exists() else {}
        return f"Run({str(self.path)!r}, {s.get('model', '?')} on {s.get('data', '?')}, status={s.get('status', '?')})"


def load_run(run_dir: str | Path) -> Run:
    """The run in `run_dir` (a repcost-train output directory, or a sweep job's directory)."""
    run_dir = Path(run_dir)
    if not ((run_dir / ".hydra" / "config.yaml").exists() or (run_dir / CHECKPOINT).exists()):
        raise RepcostError(f"{run_dir} is not a repcost run directory (no .hydra/config.yaml, no {CHECKPOINT})")
    return Run(run_dir)


def load_sweep(sweep_dir: str | Path, finished_only: bool = False) -> list[dict]:
    """The rows of a sweep's runs.csv (numbers parsed), each with `path`, its job directory for load_run.

    Rows of jobs from an earlier multirun into the same directory (`last_sweep` false) are left out.
    """
    sweep_dir = Path(sweep_dir)
    f = sweep_dir / "runs.csv"
    if not f.exists():
        raise RepcostError(f"{f} not found: run the sweep first (or `repcost-collect {sweep_dir}`)")
    rows = [r for r in read_csv(f) if r.get("last_sweep", True) is not False]
    for r in rows:
        r["path"] = sweep_dir / str(r["job"])
    return [r for r in rows if r.get("status") == "finished"] if finished_only else rows
