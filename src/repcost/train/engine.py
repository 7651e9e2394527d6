"""The one training loop (docs/ARCHITECTURE.md, "The engine").

`Engine` trains K ≥ 1 members in lockstep: optimiser phases in sequence, the explicit λ-term,
learning-rate schedules, stop rules, logging, periodic hooks, checkpoints, NaN rollback and
preemption. A single run is K = 1 over the model itself (`terms.ModelTerms`); an ensemble is
K stacked members (`terms.StackedTerms`). What is per member (position, minibatch generator,
plateau record, last finite state, result) lives in `Member`, so every member stops exactly
where its own single run would.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

import torch
from tqdm.auto import tqdm

from ..config.schema import PhaseConfig, TrainConfig
from ..data.bundle import DataBundle
from ..errors import RepcostError
from ..models.base import RepModel
from .objective import data_loss, objective, reg_scale_factor
from .optim import Optimizer
from .preempt import StopFlag
from .schedule import lr_factor
from .step import Stepper

log = logging.getLogger(__name__)


@dataclass
class Position:
    """Where a run is: enough, with the model/optimiser/RNG state, to resume exactly."""

    phase: int = 0
    step_in_phase: int = 0
    step: int = 0
    best_objective: float = math.inf
    best_step: int = 0
    first_objective: float = math.nan  # the objective at the first check (the divergence rule's reference)


FAILED_REASONS = ("non_finite", "diverged")


@dataclass
class TrainResult:
    stop_reason: str  # budget | target_loss | plateau | grad_tol | non_finite | diverged | preempted
    steps: int
    message: str = ""

    @property
    def status(self) -> str:
        """The run's status: preempted (resumable), failed (non-finite or diverged), or finished."""
        if self.stop_reason == "preempted":
            return "preempted"
        return "failed" if self.stop_reason in FAILED_REASONS else "finished"


def batch_size_of(phase: PhaseConfig, n: int) -> int | None:
    """The phase's minibatch size, or None for full batch (batch_size null or >= n)."""
    return phase.batch_size if phase.batch_size is not None and phase.batch_size < n else None


def minibatch_indices(n: int, batch_size: int, gen: torch.Generator) -> torch.Tensor:
    """Row indices of one minibatch: the first batch_size of a fresh permutation drawn from gen (CPU)."""
    return torch.randperm(n, generator=gen)[:batch_size]


def training_targets(data: DataBundle, y: torch.Tensor, loss: str) -> torch.Tensor:
    """Class indices become one-hot rows for MSE on a classification dataset."""
    if loss == "mse" and data.task == "classification":
        return torch.nn.functional.one_hot(y, data.n_classes).to(data.x_train.dtype)
    return y


class Member:
    """One trained model's own state inside the engine: position, minibatch order, stop rules, logs.

    `model` may hold views into stacked tensors (an ensemble member); everything here reads and
    writes it as an ordinary model, so a member behaves exactly as its single run.
    """

    def __init__(self, model: RepModel, data: DataBundle, cfg: TrainConfig, seed: int,
                 on_log: Callable[[dict], None] | None = None,
                 hook: Callable[[RepModel, int], dict] | None = None, hook_every: int = 0):
        self.model, self.data, self.cfg, self.seed = model, data, cfg, seed
        self.on_log, self.hook, self.hook_every = on_log, hook, hook_every
        self.y_train = training_targets(data, data.y_train, cfg.loss)
        self.y_test = training_targets(data, data.y_test, cfg.loss) if data.has_test else None
        self.reg_coef = cfg.lam * reg_scale_factor(cfg.reg_scale, model.depth)
        self.pos = Position()
        self.gen = torch.Generator().manual_seed(seed)  # minibatch order
        self.result: TrainResult | None = None
        self.optimizer_state: dict | None = None  # this member's optimiser state, once it stopped
        self.good_step = -1  # the last step whose check found the objective finite (-1: none yet)
        # (tensors, index): where the engine keeps the last parameters seen finite (index: this
        # member's slice of stacked tensors, None for a single model's own)
        self.restore_from: tuple[list[torch.Tensor], int | None] | None = None

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self, optimizer_state: dict | None) -> dict:
        """The single-run checkpoint entry: model, optimiser, position, minibatch RNG."""
        return {"model": {k: v.clone() for k, v in self.model.state_dict().items()},
                "optimizer": optimizer_state, "position": asdict(self.pos), "generator": self.gen.get_state()}

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict()` (the optimiser state is the engine's business)."""
        self.model.load_state_dict(state["model"])
        self.pos = Position(**state["position"])
        self.gen.set_state(state["generator"])

    # -- evaluation ----------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self) -> dict:
        """Objective, train loss, test loss and ‖θ‖² at the current parameters (full batch)."""
        obj, dl, sq = objective(self.model, self.data.x_train, self.y_train, self.cfg.loss,
                                self.cfg.lam, self.cfg.reg_scale)
        out = {"objective": obj.item(), "train_loss": dl.item(), "param_sq_norm": sq.item()}
        if self.y_test is not None:
            out["test_loss"] = data_loss(self.model(self.data.x_test), self.y_test, self.cfg.loss).item()
        return out

    # -- stop rules ----------------------------------------------------------------------------
    def check(self, step: int, o: float, d: float, grad_rel: float | None, last_phase: bool) -> TrainResult | None:
        """Non-finite, divergence, target-loss, gradient and plateau rules (every `check_every` steps)."""
        cfg = self.cfg
        if not (math.isfinite(o) and math.isfinite(d)):
            last = self.restore_good()
            where = f"restored to step {last}, the last finite state" if last >= 0 else "not restored (no finite state was seen)"
            return TrainResult("non_finite", step, f"objective became {o} at step {step}; the model was {where} "
                               "(try a smaller learning rate)")
        if math.isnan(self.pos.first_objective):
            self.pos.first_objective = o
        elif cfg.diverge_factor and o > cfg.diverge_factor * max(self.pos.first_objective, 1e-300):
            return TrainResult("diverged", step, f"objective {o:.4g} at step {step} exceeds {cfg.diverge_factor:g} times "
                               f"its first value {self.pos.first_objective:.4g} (train.diverge_factor); "
                               "try a smaller learning rate")
        self.good_step = step  # the engine snapshots the parameters after the checks
        if cfg.target_loss is not None and d <= cfg.target_loss:
            return TrainResult("target_loss", step, f"train loss {d:.3g} <= {cfg.target_loss}")
        if cfg.grad_tol is not None and last_phase and grad_rel is not None and grad_rel <= cfg.grad_tol:
            return TrainResult("grad_tol", step, f"relative gradient norm {grad_rel:.3g} <= {cfg.grad_tol:g}")
        if cfg.plateau_window:
            if o < self.pos.best_objective * (1 - cfg.plateau_rel_tol):
                self.pos.best_objective, self.pos.best_step = o, step
            elif step - self.pos.best_step >= cfg.plateau_window:
                return TrainResult("plateau", step, f"objective improved by < {cfg.plateau_rel_tol:g} "
                                   f"(relative) over {cfg.plateau_window} steps")
        return None

    def restore_good(self) -> int:
        """Put back the last parameters seen finite; returns their step (-1 if none)."""
        if self.good_step < 0 or self.restore_from is None:
            return -1
        tensors, i = self.restore_from
        params = [p for p in self.model.parameters() if p.requires_grad]
        with torch.no_grad():
            for p, t in zip(params, tensors):
                p.copy_(t if i is None else t[i])
        return self.good_step

    def final_check(self) -> TrainResult:
        """The result of a member whose step budget ran out."""
        ev = self.evaluate()
        if not math.isfinite(ev["objective"]):
            last = self.restore_good()
            return TrainResult("non_finite", self.pos.step, f"objective became {ev['objective']} by the end; "
                               f"the model was restored to step {last}, the last finite state")
        return TrainResult("budget", self.pos.step)

    # -- logging -------------------------------------------------------------------------------
    def log(self, step: int, lr: float, o: float, d: float, sq: float, t0: float) -> None:
        """One metrics record (test loss included) to `on_log`."""
        rec = {"step": step, "phase": self.pos.phase, "lr": lr, "objective": o, "train_loss": d,
               "param_sq_norm": sq, "time_s": time.perf_counter() - t0}
        if self.y_test is not None:
            with torch.no_grad():
                rec["test_loss"] = data_loss(self.model(self.data.x_test), self.y_test, self.cfg.loss).item()
        self.on_log(rec)

    def run_hook(self, step: int) -> None:
        """The periodic analysis hook, its scalars logged at this step."""
        if self.hook is not None and self.hook_every and step % self.hook_every == 0 and step > 0:
            rec = self.hook(self.model, step)
            if rec and self.on_log is not None:
                self.on_log({"step": step, **rec})


class Terms(Protocol):
    """How the engine evaluates its K members: their data loss and Σ‖p‖², and their parameters."""

    params: list[torch.Tensor]  # what the optimiser steps
    stacked: bool  # whether params carry a leading member axis

    def __call__(self, x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor | None
                 ) -> tuple[torch.Tensor, torch.Tensor]: ...  # (K,) data losses, (K,) Σ‖p‖²


class Engine:
    """Minimises data loss + λ·s·Σ‖p‖² for K members at once, phase after phase; one loop for every run.

    Members may differ in seed, λ (`cfg.lam`), learning rates (`cfg.phases[*].lr`) and
    initialisation; everything else (the phases' optimisers, steps, schedules, minibatch sizes,
    stop rules) is `cfg`'s. How a step is executed (eager, compiled, CUDA graph) is `stepper`'s.
    """

    def __init__(self, members: Sequence[Member], terms: Terms, cfg: TrainConfig,
                 stop_flag: StopFlag | None = None, on_checkpoint: Callable[[], None] | None = None,
                 compiled: bool = False, graphed: bool = False):
        self.members, self.terms, self.cfg = list(members), terms, cfg
        self.K = len(self.members)
        self.stop_flag = stop_flag if stop_flag is not None else StopFlag()
        self.on_checkpoint = on_checkpoint
        self.pos = Position()
        self.optimizer: Optimizer | None = None
        self.resume_optimizer: dict | None = None  # the stacked (or single-run) optimiser state to resume
        self.resume_member_optimizers: dict[int, dict] = {}  # member i's single-run optimiser state to resume
        m0 = self.members[0]
        self.stepper = Stepper(terms, m0.data.x_train, m0.y_train, self.K, compiled=compiled, graphed=graphed,
                               want_grad=cfg.grad_tol is not None)
        # subnormal floats cost a CPU 10-100x per operation (Optimizer.flush_subnormals); a GPU runs them at speed
        self._flush = cfg.flush_subnormals and terms.params[0].device.type == "cpu"
        self._snapshot = [p.detach().clone() for p in terms.params]  # the last parameters seen finite
        for i, m in enumerate(self.members):
            m.restore_from = (self._snapshot, i if terms.stacked else None)

    @property
    def active(self) -> list[int]:
        """Members still training."""
        return [i for i in range(self.K) if self.members[i].result is None]

    def sync_positions(self) -> None:
        """Active members' positions are the engine's (the loop advances only the engine's, one member
        bookkeeping less per step); copy it into theirs before anything reads them."""
        for i in self.active:
            p = self.members[i].pos
            p.phase, p.step_in_phase, p.step = self.pos.phase, self.pos.step_in_phase, self.pos.step

    def stop(self, i: int, result: TrainResult, opt_state: dict | None = None) -> None:
        """Freeze member i at its current parameters (already restored if it went non-finite)."""
        m = self.members[i]
        if m.result is None and self.optimizer is not None:  # stopped while training: it stops here
            p = m.pos
            p.phase, p.step_in_phase, p.step = self.pos.phase, self.pos.step_in_phase, self.pos.step
        if opt_state is None and self.optimizer is not None:
            opt_state = self.optimizer.member_state_dict(i)
        m.optimizer_state, m.result = opt_state, result
        if self.optimizer is not None:
            self.optimizer.active[i] = False

    def optimizer_state(self, i: int) -> dict | None:
        """Member i's optimiser state in a single run's format (its state at its stop, if it stopped)."""
        m = self.members[i]
        if m.optimizer_state is not None or self.optimizer is None:
            return m.optimizer_state
        return self.optimizer.member_state_dict(i)

    def _start_phase(self, ph: PhaseConfig) -> int | None:
        """A fresh optimiser for phase `ph` (resumed state applied), the stepper told; returns the batch size."""
        members, dev = self.members, self.terms.params[0].device
        opt = Optimizer(ph.optimizer, self.terms.params, ph.momentum, self.K, self.terms.stacked)
        if self.resume_optimizer is not None:
            opt.load_state_dict(self.resume_optimizer)
            self.resume_optimizer = None
        for i, sd in self.resume_member_optimizers.items():
            if sd is not None:
                opt.load_member_state_dict(i, sd)
        self.resume_member_optimizers = {}
        for i in range(self.K):
            if members[i].result is not None:
                opt.active[i] = False
        self.optimizer = opt
        self._base_lr = torch.tensor([m.cfg.phases[self.pos.phase].lr for m in members], dtype=torch.float64,
                                     device=dev)
        dtype = self.terms.params[0].dtype
        coef = [m.reg_coef for m in members]
        stated = torch.tensor(coef, dtype=torch.float64).to(device=dev, dtype=dtype)
        trained = torch.tensor([c * ph.lam_factor for c in coef], dtype=torch.float64).to(device=dev, dtype=dtype)
        bs = batch_size_of(ph, members[0].data.x_train.shape[0])
        self.stepper.start_phase(opt, stated, trained, bs)
        return bs

    def run(self) -> list[TrainResult]:
        """Train from the current position until every member has stopped; returns each member's result."""
        cfg, members = self.cfg, self.members
        n = members[0].data.x_train.shape[0]
        want_grad = cfg.grad_tol is not None
        stepper = self.stepper
        hooked = any(m.hook is not None and m.hook_every for m in members)  # else no per-member call per step
        bar = tqdm(total=cfg.total_steps, initial=self.pos.step, disable=None if cfg.progress else True,
                   dynamic_ncols=True, leave=False)
        t0 = time.perf_counter()
        try:
            while self.pos.phase < len(cfg.phases) and self.active:
                ph = cfg.phases[self.pos.phase]
                last_phase = self.pos.phase == len(cfg.phases) - 1
                if ph.insert_units and self.pos.step_in_phase == 0:
                    self._insert_units(ph)
                if ph.rebalance and self.pos.step_in_phase == 0:
                    self._rebalance()
                bs = self._start_phase(ph)
                lr_now, last_factor = self.optimizer.lr, None
                phase_done = False
                active = self.active
                while self.pos.step_in_phase < ph.steps and not phase_done:
                    if not active:
                        break
                    if self.stop_flag:
                        self.sync_positions()
                        for i in active:
                            members[i].result = TrainResult("preempted", self.pos.step, f"signal {self.stop_flag.signal}")
                        break
                    factor = lr_factor(ph.schedule, ph.final_lr_ratio, self.pos.step_in_phase, ph.steps)
                    if factor != last_factor:  # a constant schedule launches nothing per step
                        torch.mul(self._base_lr, factor, out=lr_now)
                        last_factor = factor
                    idx = None
                    if bs is not None:  # each active member draws its own rows from its own generator
                        idx = torch.stack([minibatch_indices(n, bs, members[i].gen) if members[i].result is None
                                           else torch.arange(bs) for i in range(self.K)])
                        if not stepper.graphed:
                            idx = idx.to(stepper.x.device)
                    obj, dl, sq = stepper.grads(idx)
                    step = self.pos.step
                    check = step % cfg.check_every == 0
                    logs = step % cfg.log_every == 0 and members[0].on_log is not None
                    vals = torch.stack([obj, dl, sq]).cpu().tolist() if check or logs else None
                    if check:
                        grad_rel = None
                        if want_grad:
                            g2, p2 = stepper.grad_norms()
                            grad_rel = (g2.sqrt() / p2.sqrt().clamp_min(1e-300)).cpu().tolist()
                        stopped = False
                        for i in active:
                            r = members[i].check(step, vals[0][i], vals[1][i], grad_rel[i] if grad_rel else None,
                                                 last_phase)
                            if r is not None:
                                self.stop(i, r)
                                stopped = True
                        if self._flush:
                            self.optimizer.flush_subnormals()
                        self._take_snapshot()
                        if grad_rel is not None and not last_phase and all(
                                grad_rel[i] <= cfg.grad_tol for i in self.active):
                            phase_done = True  # every member sits at a critical point of this phase's objective
                        if stopped:
                            active = self.active
                    if logs:
                        self.sync_positions()
                        lr_host = lr_now.tolist()
                        for i in active:
                            members[i].log(step, lr_host[i], vals[0][i], vals[1][i], vals[2][i], t0)
                    if hooked:
                        for i in active:
                            members[i].run_hook(step)
                    if not active:
                        break
                    stepper.update()
                    self.pos.step_in_phase += 1
                    self.pos.step += 1
                    bar.update(1)
                    if check:
                        best = min(vals[0][i] for i in active)
                        bar.set_postfix(obj=f"{best:.4g}", active=f"{len(active)}/{self.K}", refresh=False)
                    if cfg.checkpoint_every and self.pos.step % cfg.checkpoint_every == 0 \
                            and self.on_checkpoint is not None:
                        self.sync_positions()
                        self.on_checkpoint()
                else:
                    self._next_phase()
                    continue
                if phase_done:
                    self._next_phase()
                    continue
                break  # the inner loop broke: everyone stopped, or preempted
        finally:
            bar.close()
            self.sync_positions()
        for i in self.active:  # the budget ran out
            self.stop(i, members[i].final_check())
        return [m.result for m in members]

    def _rebalance(self) -> None:
        """Every active member to the least-penalty point of its rescaling orbit (PhaseConfig.rebalance)."""
        for i in self.active:
            m = self.members[i]
            loss0 = m.evaluate()["train_loss"]
            try:
                before, after = m.model.rebalance()
            except (ValueError, NotImplementedError) as e:
                raise RepcostError(f"train.phases[{self.pos.phase}].rebalance=true: {e}") from None
            loss1 = m.evaluate()["train_loss"]
            if not abs(loss1 - loss0) <= 1e-4 * abs(loss0) + 1e-12:  # a family whose rescaling is not a symmetry
                raise RepcostError(f"rebalancing the {m.model.family} model changed its train loss {loss0:.6g} -> "
                                   f"{loss1:.6g}: its rescale_units does not keep the function")
            log.info("member %d (seed %d), phase %d: rebalanced, largest unit gap %.3g -> %.3g",
                     i, m.seed, self.pos.phase, before, after)
        self._take_snapshot()

    def _insert_units(self, ph: PhaseConfig) -> None:
        """Every active member re-places idle units where a new one lowers this phase's objective
        (PhaseConfig.insert_units)."""
        for i in self.active:
            m = self.members[i]
            try:
                feats = m.model.insert_units(m.data.x_train, m.y_train, ph.insert_units, m.reg_coef * ph.lam_factor)
            except (ValueError, NotImplementedError) as e:
                raise RepcostError(f"train.phases[{self.pos.phase}].insert_units={ph.insert_units}: {e}") from None
            if feats:
                log.info("member %d (seed %d), phase %d: inserted %d units, largest dual violation %.3g",
                         i, m.seed, self.pos.phase, len(feats), max(f.violation for f in feats))
        self._take_snapshot()

    @torch.no_grad()
    def _take_snapshot(self) -> None:
        """The parameters just checked finite (members restored on a non-finite check hold their old ones)."""
        torch._foreach_copy_(self._snapshot, [p.detach() for p in self.terms.params])

    def _next_phase(self) -> None:
        self.pos.phase += 1
        self.pos.step_in_phase = 0
        self.sync_positions()
