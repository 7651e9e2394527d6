"""The one training loop (docs/ARCHITECTURE.md, "The engine").

`Engine` trains K ≥ 1 models in lockstep: optimiser phases in sequence, the explicit λ-term,
learning-rate schedules, stop rules, logging, periodic hooks, checkpoints, NaN rollback and
preemption. K = 1 evaluates the model itself, K > 1 stacks the models (`terms.Terms`). The members
still training share the engine's one `Position`; what is a member's own (stop-rule record, minibatch
generator, last finite state, result, where it stopped) lives in `Member`, so every member stops exactly
where its own single run would.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields

import torch
from tqdm.auto import tqdm

from ..analysis.alignment import merge_units
from ..analysis.critical import rebalance
from ..analysis.relu_1d import duality_gap, insert_units, place_convex_minimum
from ..config.schema import PhaseConfig, TrainConfig
from ..data.bundle import DataBundle
from ..errors import RepcostError
from ..models.base import RepModel
from ..objective import data_loss, objective, reg_scale_factor, training_targets
from .optim import Optimizer, lr_factor
from .polish import polish
from .preempt import StopFlag
from .step import Stepper
from .terms import Terms

log = logging.getLogger(__name__)


@dataclass
class Position:
    """Where training is: phase, step within it, step overall."""

    phase: int = 0
    step_in_phase: int = 0
    step: int = 0


@dataclass
class Record:
    """A member's stop-rule record: the plateau rule's best objective and the divergence rule's reference."""

    best_objective: float = math.inf
    best_step: int = 0
    first_objective: float = math.nan  # the objective at the first check


@dataclass
class TrainResult:
    stop_reason: str  # budget | target_loss | plateau | grad_tol | certified | non_finite | diverged | preempted
    steps: int
    message: str = ""

    @property
    def status(self) -> str:
        """The run's status: preempted (resumable), failed (non-finite or diverged), or finished."""
        return {"preempted": "preempted", "non_finite": "failed", "diverged": "failed"}.get(self.stop_reason, "finished")


class Member:
    """One trained model's own state inside the engine: stop-rule record, minibatch order, result, logs.

    `model` may hold views into stacked tensors; everything here reads and writes it as an
    ordinary model, so a member behaves exactly as its single run.
    """

    def __init__(self, model: RepModel, data: DataBundle, cfg: TrainConfig, seed: int,
                 on_log: Callable[[dict], None] | None = None, hook: Callable[[RepModel, int], dict] | None = None):
        self.model, self.data, self.cfg, self.seed, self.on_log, self.hook = model, data, cfg, seed, on_log, hook
        self.y_train = training_targets(data, data.y_train, cfg.loss)
        self.y_test = training_targets(data, data.y_test, cfg.loss) if data.x_test is not None else None
        self.reg_coef = cfg.lam * reg_scale_factor(cfg.reg_scale, model.depth)
        self.record = Record()
        self.gen = torch.Generator().manual_seed(seed)  # minibatch order
        self.result: TrainResult | None = None
        self.stopped_at: Position | None = None  # where it stopped; None while it trains at the engine's position
        self.optimizer_state: dict | None = None  # its optimiser state at the stop, or resumed with until it trains
        self.good_step = -1  # the last step whose check found the objective finite (-1: none yet)
        self.last_logged = -1
        self.gap: float | None = None  # the last duality gap certified stopping measured (train.certify)

    # -- evaluation ----------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self) -> dict:
        """Objective, train loss, test loss and ‖θ‖² at the current parameters (full batch)."""
        obj, dl, sq = objective(self.model, self.data.x_train, self.y_train, self.cfg.loss,
                                self.cfg.lam, self.cfg.reg_scale)
        out = {"objective": obj.item(), "train_loss": dl.item(), "param_sq_norm": sq.item()}
        return out if self.y_test is None else {**out, "test_loss": self.test_loss()}

    @torch.no_grad()
    def test_loss(self) -> float:
        return data_loss(self.model(self.data.x_test), self.y_test, self.cfg.loss).item()

    # -- stop rules ----------------------------------------------------------------------------
    def failure(self, step: int, o: float, d: float) -> TrainResult | None:
        """The non-finite and divergence rules (these fail a run)."""
        if not (math.isfinite(o) and math.isfinite(d)):
            last = self.good_step  # the engine restores that state (`Engine.stop`)
            where = f"restored to step {last}, the last finite state" if last >= 0 else "not restored (no finite state was seen)"
            return TrainResult("non_finite", step, f"objective became {o} at step {step}; the model was {where} "
                               "(try a smaller learning rate)")
        factor, first = self.cfg.diverge_factor, self.record.first_objective
        if factor and not math.isnan(first) and o > factor * max(first, 1e-300):
            return TrainResult("diverged", step, f"objective {o:.4g} at step {step} exceeds {factor:g} times "
                               f"its first value {first:.4g} (train.diverge_factor); try a smaller learning rate")
        return None

    def check(self, step: int, o: float, d: float, grad_rel: float | None, last_phase: bool) -> TrainResult | None:
        """Non-finite, divergence, target-loss, gradient and plateau rules (every `check_every` steps)."""
        cfg, rec = self.cfg, self.record
        failed = self.failure(step, o, d)
        if failed is not None:
            return failed
        if math.isnan(rec.first_objective):
            rec.first_objective = o
        self.good_step = step  # the engine snapshots the parameters after the checks
        if cfg.target_loss is not None and d <= cfg.target_loss:
            return TrainResult("target_loss", step, f"train loss {d:.3g} <= {cfg.target_loss}")
        if cfg.grad_tol is not None and last_phase and grad_rel is not None and grad_rel <= cfg.grad_tol:
            return TrainResult("grad_tol", step, f"relative gradient norm {grad_rel:.3g} <= {cfg.grad_tol:g}")
        if cfg.plateau_window:
            if o < rec.best_objective * (1 - cfg.plateau_rel_tol):
                rec.best_objective, rec.best_step = o, step
            elif step - rec.best_step >= cfg.plateau_window:
                return TrainResult("plateau", step, f"objective improved by < {cfg.plateau_rel_tol:g} "
                                   f"(relative) over {cfg.plateau_window} steps")
        return None

    # -- what a phase does before its first step --------------------------------------------
    def prepare(self, key: str, ph: PhaseConfig) -> str | None:
        """Phase `ph`'s `key` (insert_units, convex_units, merge_units, rebalance or polish) applied to the model; what it did."""
        x, y, rho = self.data.x_train, self.y_train, self.reg_coef * ph.lam_factor
        if key == "insert_units":
            feats = insert_units(self.model, x, y, ph.insert_units, rho)
            return f"inserted {len(feats)} units, largest dual violation {max(v for _, v in feats):.3g}" if feats else None
        if key == "convex_units":
            k = place_convex_minimum(self.model, x, y, rho)
            return f"placed the convex problem's minimiser ({k} units)" if k else "kept (no lower objective)"
        if key == "merge_units":
            before, n = self.evaluate()["objective"], merge_units(self.model, x, ph.merge_units)  # in this order
            return f"set {n} units to 0 (merged or dead), objective {before:.10g} -> {self.evaluate()['objective']:.10g}"
        if key == "rebalance":
            loss0 = self.evaluate()["train_loss"]
            before, after = rebalance(self.model)
            loss1 = self.evaluate()["train_loss"]
            if not abs(loss1 - loss0) <= 1e-4 * abs(loss0) + 1e-12:  # a family whose rescaling is not a symmetry
                raise RepcostError(f"rebalancing the {self.model.family} model changed its train loss {loss0:.6g} -> "
                                   f"{loss1:.6g}: its rescale_units does not keep the function")
            return f"rebalanced, largest unit gap {before:.3g} -> {after:.3g}"
        c = self.cfg
        r = polish(self.model, x, y, c.loss, c.lam * ph.lam_factor, c.reg_scale, ph.polish, ph.polish_seconds,
                   ph.polish_tol)
        return (f"polished in {r.iterations} iterations, {r.seconds:.1f} s: {r.removed} units removed, "
                f"objective {r.objective_start:.10g} -> {r.objective_end:.10g}, Clarke {r.clarke:.3g}")

    # -- logging -------------------------------------------------------------------------------
    def log(self, rec: dict) -> None:
        """One metrics record (test loss added) to `on_log`."""
        if self.y_test is not None and "test_loss" not in rec:
            rec["test_loss"] = self.test_loss()
        self.last_logged = rec["step"]
        self.on_log(rec)


class Engine:
    """Minimises data loss + λ·s·Σ‖p‖² for K models at once, phase after phase; one loop for every run.

    Members may differ in seed, λ (`cfgs[i].lam`), learning rates (`cfgs[i].phases[*].lr`) and
    initialisation; everything else (the phases' optimisers, steps, schedules, minibatch sizes,
    stop rules) is the first config's (`run.train_runs` checks this, `identity.check_stackable`). How a step
    is executed (eager, compiled, CUDA graph) is the `Stepper`'s. `on_checkpoint()` is called every
    `train.checkpoint_every` steps.
    """

    def __init__(self, models: Sequence[RepModel], data: DataBundle, cfgs: Sequence[TrainConfig],
                 seeds: Sequence[int], on_logs: Sequence[Callable[[dict], None]] | None = None,
                 hooks: Sequence[Callable | None] | None = None, hook_every: int = 0,
                 stop_flag: StopFlag | None = None, compiled: bool = False, graphed: bool = False):
        self.K = len(models)
        self.cfg = cfgs[0]
        self.phases = self.cfg.all_phases  # the schedule, then the certify escalation rounds
        self.members = [Member(m, data, c, s, on_log, hook) for m, c, s, on_log, hook
                        in zip(models, cfgs, seeds, on_logs or [None] * self.K, hooks or [None] * self.K)]
        self.terms = Terms(models, self.cfg.loss)
        self.stop_flag = stop_flag if stop_flag is not None else StopFlag()
        self.on_checkpoint: Callable[[], None] | None = None
        self.pos = Position()
        self.optimizer: Optimizer | None = None
        self._logging = on_logs is not None  # a sink for every member, or none (a library Engine)
        self.hook_every = hook_every if any(m.hook is not None for m in self.members) else 0  # 0: no hook
        self.stepper = Stepper(self.terms, data.x_train, self.members[0].y_train, self.K, compiled=compiled,
                               graphed=graphed, want_grad=self.cfg.grad_tol is not None)
        # subnormal floats cost a CPU 10-100x per operation (Optimizer.flush_subnormals); a GPU runs them at speed
        self._flush = self.cfg.flush_subnormals and self.terms.params[0].device.type == "cpu"
        self._snapshot = [p.detach().clone() for p in self.terms.params]  # the last parameters seen finite

    # -- members -------------------------------------------------------------------------------
    @property
    def active(self) -> list[int]:
        """Members still training."""
        return [i for i in range(self.K) if self.members[i].result is None]

    def position(self, i: int) -> Position:
        """Member i's position: where it stopped, or the engine's while it trains."""
        return self.members[i].stopped_at or self.pos

    def last_phase(self, i: int) -> int:
        """The index of the last phase member i trained in (a stop at the budget sits past the end)."""
        return min(self.position(i).phase, len(self.phases) - 1)

    def stop(self, i: int, result: TrainResult) -> None:
        """Freeze member i at its current parameters, or at the last ones seen finite if it went non-finite."""
        m = self.members[i]
        if result.stop_reason == "non_finite" and m.good_step >= 0:
            with torch.no_grad():
                for p, t in zip([p for p in m.model.parameters() if p.requires_grad], self._snapshot):
                    p.copy_(t[i] if self.terms.stacked else t)
        m.stopped_at, m.result = Position(**asdict(self.pos)), result  # only a member still training stops
        m.optimizer_state = self.optimizer.member_state_dict(i)  # (every phase has an optimiser from its start)
        self.optimizer.active[i] = False

    def state_dict(self, i: int) -> dict:
        """Member i's checkpoint entry (a single run's): model, optimiser, position, minibatch RNG."""
        m = self.members[i]
        opt = m.optimizer_state if m.result is not None or self.optimizer is None else self.optimizer.member_state_dict(i)
        return {"model": {k: v.clone() for k, v in m.model.state_dict().items()}, "optimizer": opt,
                "position": {**asdict(self.position(i)), **asdict(m.record)}, "generator": m.gen.get_state()}

    def load_state_dict(self, i: int, state: dict) -> None:
        """Resume member i from a `state_dict(i)`; every member resumed must be at the same position."""
        m = self.members[i]
        m.model.load_state_dict(state["model"])  # copies into the stacked tensors through the views
        p = state["position"]
        self.pos = Position(**{f.name: p[f.name] for f in fields(Position)})
        m.record = Record(**{f.name: p[f.name] for f in fields(Record) if f.name in p})
        m.gen.set_state(state["generator"])
        m.optimizer_state = state.get("optimizer")
        self._take_snapshot()

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> list[TrainResult]:
        """Train from the current position until every member has stopped; returns each member's result."""
        cfg = self.cfg
        self._bar = tqdm(total=cfg.total_steps, initial=self.pos.step, disable=None if cfg.progress else True,
                         dynamic_ncols=True, leave=False)
        self._t0 = time.perf_counter()
        try:
            while self.pos.phase < len(self.phases) and self.active:
                ph = self.phases[self.pos.phase]
                self._run_phase(ph)  # every member may have stopped in it: the checks below then have none to check
                self._final_check()
                if cfg.certify.gap_tol is not None and ph.lam_factor == 1.0:
                    self._certify_check()
                self.pos.phase += 1
                self.pos.step_in_phase = 0
        finally:
            self._bar.close()
        for i in self.active:  # the budget ran out
            self.stop(i, TrainResult("budget", self.pos.step))
        for i, m in enumerate(self.members):  # the state each member ends in is the last line of its metrics
            if m.on_log is not None and m.result.status == "finished" and m.last_logged != self.position(i).step:
                m.log({"step": self.position(i).step, "phase": self.last_phase(i), **m.evaluate(),
                       "time_s": time.perf_counter() - self._t0})  # the state after the last step: no step, no lr
        return [m.result for m in self.members]

    def _run_phase(self, ph: PhaseConfig) -> None:
        """The steps of one phase from the current position (schedule, minibatch, gradients, checks, logs, hooks,
        update), until all its steps are done, every member left sits at a critical point of this phase's objective,
        or no member trains (each stopped, or preempted)."""
        if self.pos.step_in_phase == 0:
            self._before_phase(ph)
        bs = self._start_phase(ph)
        cfg, members, last_phase = self.cfg, self.members, self.pos.phase == len(self.phases) - 1
        while self.pos.step_in_phase < ph.steps:
            step = self.pos.step
            if self.stop_flag:
                for i in self.active:
                    self.stop(i, TrainResult("preempted", step, f"signal {self.stop_flag.signal}"))
                return
            factor = lr_factor(ph.schedule, ph.final_lr_ratio, self.pos.step_in_phase, ph.steps)
            if factor != self._lr_factor:  # into the optimiser's (K,) rates: a constant schedule launches nothing
                torch.mul(self._base_lr, factor, out=self.optimizer.lr)
                self._lr_factor = factor
            obj, dl, sq = self.stepper.grads(self._minibatch(bs))
            check = step % cfg.check_every == 0
            logs = self._logging and step % cfg.log_every == 0
            vals = torch.stack([obj, dl, sq]).cpu().tolist() if check or logs else None
            phase_done = check and self._check(step, vals, last_phase)
            active = self.active
            if logs:
                lr_host = self.optimizer.lr.tolist()
                for i in active:
                    members[i].log({"step": step, "phase": self.pos.phase, "lr": lr_host[i], "objective": vals[0][i],
                                    "train_loss": vals[1][i], "param_sq_norm": vals[2][i],
                                    "time_s": time.perf_counter() - self._t0})
            for i in active if self.hook_every and step % self.hook_every == 0 and step > 0 else ():
                m = members[i]  # the periodic analysis hook, its scalars logged at this step
                rec = m.hook(m.model, step) if m.hook is not None else None
                if rec and m.on_log is not None:
                    m.on_log({"step": step, **rec})
            if not active:
                return
            self.stepper.update()
            self.pos.step_in_phase += 1
            self.pos.step += 1
            self._bar.update(1)
            if check:
                best = min(vals[0][i] for i in active)
                self._bar.set_postfix(obj=f"{best:.4g}", active=f"{len(active)}/{self.K}", refresh=False)
            if cfg.checkpoint_every and self.pos.step % cfg.checkpoint_every == 0 and self.on_checkpoint is not None:
                self.on_checkpoint()
            if phase_done:
                break

    def _minibatch(self, bs: int | None) -> torch.Tensor | None:
        """(K, bs) row indices, each active member's from its own generator; None for full batch."""
        if bs is None:
            return None
        n = self.members[0].data.x_train.shape[0]
        idx = torch.stack([torch.randperm(n, generator=m.gen)[:bs] if m.result is None else torch.arange(bs)
                           for m in self.members])  # a fresh permutation's first rows, from the member's generator
        return idx if self.stepper.graphed else idx.to(self.stepper.x.device)

    def _check(self, step: int, vals: list[list[float]], last_phase: bool) -> bool:
        """The stop rules for every active member; True if every member left sits at a critical point of
        this (not last) phase's objective, so the phase ends early."""
        cfg = self.cfg
        grad_rel = None
        if cfg.grad_tol is not None:
            g2, p2 = self.stepper.grad_norms()
            grad_rel = (g2.sqrt() / p2.sqrt().clamp_min(1e-300)).cpu().tolist()
        for i in self.active:
            r = self.members[i].check(step, vals[0][i], vals[1][i], grad_rel[i] if grad_rel else None, last_phase)
            if r is not None:
                self.stop(i, r)
        if self._flush:
            self.optimizer.flush_subnormals()
        self._take_snapshot()
        return (grad_rel is not None and not last_phase and bool(self.active)
                and all(grad_rel[i] <= cfg.grad_tol for i in self.active))

    def _final_check(self) -> None:
        """The non-finite and divergence rules on the state a phase ends in, whatever `check_every` is."""
        for i in self.active:
            ev = self.members[i].evaluate()
            r = self.members[i].failure(self.pos.step, ev["objective"], ev["train_loss"])
            if r is not None:
                r.message += " (end of phase)"
                self.stop(i, r)

    def _certify_check(self) -> None:
        """Certified stopping: every active member whose duality gap is within `train.certify.gap_tol` stops here.
        Where the model has no duality gap nothing is checked again (and no escalation round runs)."""
        tol = self.cfg.certify.gap_tol
        for i in self.active:
            m = self.members[i]
            m.gap = duality_gap(m.model, m.data.x_train, m.y_train, m.cfg.loss, m.cfg.lam,
                                m.cfg.reg_scale).get("duality_gap_rel")
            if m.gap is None:  # no global certificate for this model: the schedule is the whole budget
                self.phases = self.phases[:max(len(self.cfg.phases), self.pos.phase + 1)]
            elif m.gap <= tol:
                self.stop(i, TrainResult("certified", self.pos.step, f"duality gap {m.gap:.3g} <= "
                                         f"train.certify.gap_tol {tol:g}"))

    # -- phases --------------------------------------------------------------------------------
    def _before_phase(self, ph: PhaseConfig) -> None:
        """What a phase does to the models before its first step: unit insertion, convex placement, merging,
        rebalancing, polish (`Member.prepare`)."""
        keys = [k for k in ("insert_units", "convex_units", "merge_units", "rebalance", "polish") if getattr(ph, k)]
        n = len(self.cfg.phases)  # the phase's config key, for messages:
        where = (f"train.phases[{self.pos.phase}]" if self.pos.phase < n
                 else f"train.certify.phases[{(self.pos.phase - n) % len(self.cfg.certify.phases)}]")
        for key in keys:
            for i in self.active:
                m = self.members[i]
                try:
                    done = m.prepare(key, ph)
                except (ValueError, NotImplementedError) as e:
                    raise RepcostError(f"{where}.{key}={str(getattr(ph, key)).lower()}: {e}") from None
                if done:
                    log.info("member %d (seed %d), phase %d: %s", i, m.seed, self.pos.phase, done)
        if keys:
            self._take_snapshot()

    def _start_phase(self, ph: PhaseConfig) -> int | None:
        """A fresh optimiser for phase `ph` (resumed state applied), the stepper told; returns the batch size."""
        members, dev = self.members, self.terms.params[0].device
        opt = self.optimizer = Optimizer(ph.optimizer, self.terms.params, ph.momentum, self.K)
        for i, m in enumerate(members):
            if m.result is None and m.optimizer_state is not None:  # resumed: the state it came with, once
                opt.load_member_state_dict(i, m.optimizer_state)
                m.optimizer_state = None
        opt.active.copy_(torch.tensor([m.result is None for m in members]))
        self._lr_factor = None
        self._base_lr = torch.tensor([m.cfg.all_phases[self.pos.phase].lr for m in members], dtype=torch.float64,
                                     device=dev)
        stated, trained = (torch.tensor([m.reg_coef * f for m in members], dtype=torch.float64)
                           .to(device=dev, dtype=self.terms.params[0].dtype) for f in (1.0, ph.lam_factor))
        n = members[0].data.x_train.shape[0]
        bs = ph.batch_size if ph.batch_size is not None and ph.batch_size < n else None  # None: full batch
        self.stepper.start_phase(opt, stated, trained, bs)
        return bs

    @torch.no_grad()
    def _take_snapshot(self) -> None:
        """The parameters just checked finite (members restored on a non-finite check hold their old ones)."""
        torch._foreach_copy_(self._snapshot, [p.detach() for p in self.terms.params])
