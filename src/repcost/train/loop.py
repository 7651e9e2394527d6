"""A single run's trainer: the engine with one member, the model itself (docs/ARCHITECTURE.md)."""

from __future__ import annotations

from collections.abc import Callable

from ..config.schema import TrainConfig
from ..data.bundle import DataBundle
from ..models.base import RepModel
from .engine import (  # noqa: F401 (re-exported)
    Engine,
    Member,
    Position,
    TrainResult,
    batch_size_of,
    minibatch_indices,
)
from .preempt import StopFlag
from .terms import ModelTerms


class Trainer:
    """Minimises data loss + λ·s·Σ‖p‖² over the train split, phase after phase (`Engine` with K = 1)."""

    def __init__(self, model: RepModel, data: DataBundle, cfg: TrainConfig, seed: int,
                 on_log: Callable[[dict], None] | None = None,
                 on_checkpoint: Callable[[dict], None] | None = None,
                 hook: Callable[[RepModel, int], dict] | None = None, hook_every: int = 0,
                 stop_flag: StopFlag | None = None, compiled: bool = False, graphed: bool = False):
        self.member = Member(model, data, cfg, seed, on_log=on_log, hook=hook, hook_every=hook_every)
        self.engine = Engine([self.member], ModelTerms(model, cfg.loss), cfg, stop_flag, compiled=compiled,
                             graphed=graphed)
        if on_checkpoint is not None:
            self.engine.on_checkpoint = lambda: on_checkpoint(self.state_dict())
        self.model, self.data, self.cfg, self.seed = model, data, cfg, seed

    @property
    def pos(self) -> Position:
        return self.member.pos

    @property
    def stop_flag(self) -> StopFlag:
        return self.engine.stop_flag

    def state_dict(self) -> dict:
        """Everything needed to resume: model, optimiser, position, minibatch RNG."""
        return self.member.state_dict(self.engine.optimizer_state(0))

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict()`; the optimiser state is applied when its phase starts."""
        self.member.load_state_dict(state)
        p = self.member.pos
        self.engine.pos = Position(p.phase, p.step_in_phase, p.step)
        self.engine.resume_optimizer = state.get("optimizer")

    def evaluate(self) -> dict:
        """Objective, train loss, test loss and ‖θ‖² at the current parameters."""
        return self.member.evaluate()

    def run(self) -> TrainResult:
        """Train from the current position until a stopping rule fires; returns why it stopped."""
        return self.engine.run()[0]

    # the interface run.py shares with EnsembleTrainer
    @property
    def members(self) -> list[Member]:
        return [self.member]

    def member_state_dict(self, i: int) -> dict:
        """The single-run state (i = 0)."""
        return self.state_dict()

    def run_all(self) -> list[TrainResult]:
        """`run()` as a one-element list."""
        return [self.run()]
