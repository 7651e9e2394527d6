"""Runs the analyses selected by the `analysis/` config group during and after training."""

from __future__ import annotations

from pathlib import Path

from ..config.schema import AnalysisConfig


class AnalysisRunner:
    """Periodic scalars into metrics.jsonl; final scalars into summary.json, arrays into analysis/."""

    def __init__(self, cfg: AnalysisConfig, model, data, run_dir: Path):
        self.cfg, self.data, self.run_dir = cfg, data, Path(run_dir)

    @property
    def enabled_periodic(self) -> bool:
        """Whether any analysis runs during training."""
        return bool(self.cfg.analyses) and self.cfg.every > 0

    def periodic(self, model, step: int) -> dict:
        """Scalars of the selected analyses at a training step."""
        return {}

    def final(self, model) -> dict:
        """Scalars of the selected analyses at the end (arrays are written under analysis/)."""
        return {}
