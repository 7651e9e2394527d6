"""The notebook API: `load_run(dir)` gives a run's config, summary, metrics, analysis arrays, model and data;
`load_sweep(dir)` gives a sweep's rows (runs.csv, numbers parsed).

These are repcost's one run reader and one sweep reader: figure scripts and repcost-analyze/-plot load
checkpoints through `Run.model` and sweeps through `load_sweep`.

Everything is read lazily from the run directory, so loading a run is cheap until its model or data is asked for.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from .config import validate
from .data import load_data
from .errors import RepcostError
from .models import build_model
from .renamed import config_keys
from .rundir import CHECKPOINT, MEMBERS, METRICS, SUMMARY, load_checkpoint, read_metrics, read_summary
from .sweep import read_table


def checkpoint_file(run_dir: str | Path) -> Path:
    """Where a run's trained weights are: RUN/checkpoint.pt, or, for an ensemble run that keeps them only in its
    members, RUN/members/<best_member>/checkpoint.pt (best_member from RUN/summary.json).

    A top-level checkpoint of an ensemble run, where there is one, holds the best member's weights in the
    single-run format, so it is read as a single run's.
    """
    run_dir = Path(run_dir)
    top = run_dir / CHECKPOINT
    if top.exists() or not (run_dir / MEMBERS).is_dir() or not (run_dir / SUMMARY).exists():
        return top
    best = read_summary(run_dir / SUMMARY).get("best_member")
    if not isinstance(best, int) or isinstance(best, bool):
        raise RepcostError(f"{run_dir / SUMMARY} names no best_member: cannot tell which member's {CHECKPOINT} to load")
    return run_dir / MEMBERS / str(best) / CHECKPOINT


class Run:
    """A run directory (or an ensemble member's directory) of repcost-train."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @cached_property
    def config(self) -> dict:
        """The resolved run config: .hydra/config.yaml, or the checkpoint's copy (ensemble members have no .hydra)."""
        saved = self.path / ".hydra" / "config.yaml"
        return config_keys(OmegaConf.to_container(OmegaConf.load(saved), resolve=True) if saved.exists()
                           else dict(self.checkpoint["config"]))

    @cached_property
    def summary(self) -> dict:
        """summary.json: final losses, norms, costs, analysis scalars, status."""
        f = self.path / SUMMARY
        if not f.exists():
            raise RepcostError(f"{f} not found: the run has not ended (or this is not a run directory)")
        return read_summary(f)

    @cached_property
    def metrics(self) -> list[dict]:
        """metrics.jsonl: one dict per logged step (step, phase, lr, objective, losses, …)."""
        f = self.path / METRICS
        return read_metrics(f) if f.exists() else []

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
        return read_table(f) if f.exists() else []

    @cached_property
    def checkpoint(self) -> dict:
        """checkpoint.pt as saved (plain tensors and containers); an ensemble run's best member's (checkpoint_file)."""
        f = checkpoint_file(self.path)
        if not f.exists():
            raise RepcostError(f"{f} not found: the run saved no checkpoint")
        return load_checkpoint(f)

    @cached_property
    def spec(self):
        """The validated RunSpec of the config (plugins named by the config are imported)."""
        return validate(OmegaConf.create({**self.config, "device": "cpu"}))  # on the CPU whatever the run trained on

    def data(self):
        """The run's dataset (a DataBundle: x_train, y_train, x_test, y_test, meta), rebuilt from its config."""
        return load_data(self.spec.data)

    def model(self, dtype: str | torch.dtype = "float64", spec: Any = None, data: Any = None):
        """The trained model from the run's checkpoint, in `dtype` (float64 by default, as analyses use), in eval mode.

        This is repcost's one checkpoint loader (figures and repcost-analyze use it too). `spec` and `data` (a
        validated config and its dataset, e.g. repcost-analyze's with overrides) default to the run's own. The
        model is built in float64 and the weights are loaded before any cast, so no precision is lost on the way.
        """
        spec = spec if spec is not None else self.spec
        data = data if data is not None else load_data(spec.data)
        ckpt, where = self.checkpoint, checkpoint_file(self.path)
        if ckpt.get("family", spec.model.name) != spec.model.name:
            raise RepcostError(f"{where} holds a {ckpt['family']} model, the config a {spec.model.name} model")
        state = ckpt["trainer"].get("model") if isinstance(ckpt["trainer"], dict) else None
        if not isinstance(state, dict):
            raise RepcostError(f"{where}: no model weights in it (not a repcost checkpoint)")
        model = build_model(spec.model, data.d_in, data.d_out, spec.seed)
        try:
            model.load_state_dict(state)
        except RuntimeError as e:
            raise RepcostError(f"{where} does not fit the configured model: {str(e).splitlines()[0]}") from None
        return model.to(getattr(torch, dtype) if isinstance(dtype, str) else dtype).eval()

    def members(self) -> list[Run]:
        """The members of a `train.ensemble_size=K` run (members/<i>/), each a Run; [] for a single run."""
        members = [p for p in (self.path / MEMBERS).glob("*") if p.name.isdigit()]
        return [Run(p) for p in sorted(members, key=lambda p: int(p.name))]

    def __repr__(self) -> str:
        s = self.summary if (self.path / SUMMARY).exists() else {}
        return f"Run({str(self.path)!r}, {s.get('model', '?')} on {s.get('data', '?')}, status={s.get('status', '?')})"


def load_run(run_dir: str | Path) -> Run:
    """The run in `run_dir` (a repcost-train output directory, or a sweep job's directory)."""
    run_dir = Path(run_dir)
    if not ((run_dir / ".hydra" / "config.yaml").exists() or checkpoint_file(run_dir).exists()):
        raise RepcostError(f"{run_dir} is not a repcost run directory (no .hydra/config.yaml, no {CHECKPOINT})")
    return Run(run_dir)


def load_sweep(sweep_dir: str | Path, finished_only: bool = False) -> list[dict]:
    """The rows of a sweep's runs.csv, each with `path`, its job directory for load_run: repcost's one sweep reader.

    Cells are read by `repcost.sweep.parse_value` (numbers, booleans, None; the `job` column stays text).
    Rows of jobs from an earlier multirun into the same directory (`last_sweep` false) are left out.
    """
    sweep_dir = Path(sweep_dir)
    f = sweep_dir / "runs.csv"
    if not f.exists():
        raise RepcostError(f"{f} not found: run the sweep first (or `repcost-collect {sweep_dir}`)")
    rows = [{**r, "path": sweep_dir / r["job"]} for r in read_table(f, text=("job",))
            if r.get("last_sweep", True) is not False]
    return [r for r in rows if r.get("status") == "finished"] if finished_only else rows
