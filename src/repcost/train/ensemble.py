"""Several seeds trained in one process as one stacked model (docs/ARCHITECTURE.md, Ensembles).

`train.ensemble_size=K` trains members i = 0 … K−1 with seeds `seed + i`: same model config,
same data, same optimiser phases. Member i is, up to float round-off, the run `seed=seed+i`
would give alone: its initialisation comes from `build_model(..., seed + i)`, its minibatch
order from its own generator, and it goes through the same engine (`engine.Engine`) as a single
run; only the evaluation of the objective is stacked (`terms.StackedTerms`).

A member stops when its own rule fires, at the step its single run would stop; a stopped member
is frozen (the optimiser step masks it out, its generator is not advanced)
and the ensemble stops when every member has. The run directory's layout is in `train.run`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict

from ..config.schema import TrainConfig
from ..data.bundle import DataBundle
from ..errors import RepcostError
from ..models.base import RepModel
from .engine import Engine, Member, Position, TrainResult
from .preempt import StopFlag
from .terms import StackedTerms, _ShareMatmuls, shared_matmul  # noqa: F401 (re-exported)

MEMBERS = "members"


class EnsembleTrainer:
    """Trains K models of one shape as one stacked model; member i behaves as Trainer(models[i], seeds[i]).

    `members[i]` (an engine `Member`) holds member i's model (views into the stacked tensors),
    position, minibatch generator, plateau state and last finite state; its `evaluate()` is a
    single run's. `on_log` receives the single-run metrics records with `member` and `seed`
    added; `hooks[i]` is member i's periodic analysis.
    """

    def __init__(self, models: Sequence[RepModel], data: DataBundle, cfg: TrainConfig, seeds: Sequence[int],
                 on_log: Callable[[dict], None] | None = None,
                 on_checkpoint: Callable[[dict], None] | None = None,
                 hooks: Sequence[Callable | None] | None = None, hook_every: int = 0,
                 stop_flag: StopFlag | None = None, share_matmuls: bool = True,
                 member_cfgs: Sequence[TrainConfig] | None = None, compiled: bool = False, graphed: bool = False):
        if len(models) != len(seeds) or not models:
            raise ValueError(f"need one seed per model, got {len(models)} models and {len(seeds)} seeds")
        if len({type(m) for m in models}) != 1:
            raise RepcostError("ensemble members must be models of one family")
        self.K, self.cfg, self.data, self.seeds = len(models), cfg, data, list(seeds)
        member_cfgs = list(member_cfgs) if member_cfgs is not None else [cfg] * self.K
        check_stackable(cfg, member_cfgs)
        hooks = list(hooks) if hooks is not None else [None] * self.K
        members = [Member(m, data, c, s, on_log=_tagged(on_log, i, s), hook=hooks[i], hook_every=hook_every)
                   for i, (m, s, c) in enumerate(zip(models, seeds, member_cfgs))]
        self.terms = StackedTerms(models, cfg.loss, share_matmuls)
        self.engine = Engine(members, self.terms, cfg, stop_flag, compiled=compiled, graphed=graphed)
        if on_checkpoint is not None:
            self.engine.on_checkpoint = lambda: on_checkpoint(self.state_dict())

    @property
    def members(self) -> list[Member]:
        return self.engine.members

    @property
    def pos(self) -> Position:
        return self.engine.pos

    @property
    def stop_flag(self) -> StopFlag:
        return self.engine.stop_flag

    @property
    def results(self) -> list[TrainResult | None]:
        return [m.result for m in self.members]

    def member_state_dict(self, i: int) -> dict:
        """Member i's state in the single-run `Trainer.state_dict()` format (tensors copied out of the stack)."""
        return self.members[i].state_dict(self.engine.optimizer_state(i))

    def state_dict(self) -> dict:
        """Everything needed to resume the ensemble."""
        return {"members": [m.state_dict(m.optimizer_state) for m in self.members],
                "optimizer": self.engine.optimizer.state_dict() if self.engine.optimizer is not None else None,
                "position": asdict(self.engine.pos),
                "results": [asdict(m.result) if m.result is not None and m.result.stop_reason != "preempted" else None
                            for m in self.members]}  # a preempted member goes on when resumed

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict()`; the stacked optimiser state is applied when its phase starts."""
        for m, st in zip(self.members, state["members"]):
            m.load_state_dict(st)  # copies into the stacked tensors through the views
        self.engine.pos = Position(**state["position"])
        self.engine.resume_optimizer = state.get("optimizer")
        for i, r in enumerate(state["results"]):
            if r is not None:
                self.engine.stop(i, TrainResult(**r), opt_state=state["members"][i].get("optimizer"))

    def unstack(self) -> None:
        """Give every member model its own parameter storage (after training; the stack is left as is)."""
        self.terms.unstack()

    def run(self) -> list[TrainResult]:
        """Train from the current position until every member has stopped; returns each member's result."""
        return self.engine.run()

    run_all = run


STACKABLE = "seed, train.lam, train.phases[*].lr and the model's init_scale"


def check_stackable(cfg: TrainConfig, member_cfgs: Sequence[TrainConfig]) -> None:
    """Members may differ only in λ and the phases' learning rates (besides seed and initialisation)."""
    def shape(c: TrainConfig) -> dict:
        d = asdict(c)
        d.pop("lam")
        d.pop("progress", None)
        d.pop("checkpoint_every", None)
        for ph in d["phases"]:
            ph.pop("lr")
        return d

    ref = shape(cfg)
    for i, c in enumerate(member_cfgs):
        if shape(c) != ref:
            diff = sorted(k for k in ref if shape(c)[k] != ref[k])
            raise RepcostError(f"member {i} cannot be stacked: its train.{', train.'.join(diff)} differ; "
                               f"stacked members may differ only in {STACKABLE}")


def _tagged(on_log, i: int, seed: int):
    if on_log is None:
        return None
    return lambda rec: on_log({**rec, "member": i, "seed": seed})
