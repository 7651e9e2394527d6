"""The training loop: optimiser phases in sequence, explicit weight decay, stopping, checkpoints."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable, Optional

import torch
from tqdm.auto import tqdm

from ..config.schema import TrainConfig
from ..data.bundle import DataBundle
from ..models.base import RepModel
from .objective import data_loss, objective, reg_scale_factor, stated_and_trained
from .preempt import StopFlag
from .schedule import apply_lr


@dataclass
class Position:
    """Where a run is: enough, with the model/optimiser/RNG state, to resume exactly."""

    phase: int = 0
    step_in_phase: int = 0
    step: int = 0
    best_objective: float = math.inf
    best_step: int = 0


@dataclass
class TrainResult:
    stop_reason: str  # budget | target_loss | plateau | non_finite | preempted
    steps: int
    message: str = ""

    @property
    def status(self) -> str:
        """The run's status: preempted (resumable), failed (non-finite), or finished."""
        return {"preempted": "preempted", "non_finite": "failed"}.get(self.stop_reason, "finished")


def batch_size_of(phase, n: int) -> Optional[int]:
    """The phase's minibatch size, or None for full batch (batch_size null or >= n)."""
    return phase.batch_size if phase.batch_size is not None and phase.batch_size < n else None


def minibatch_indices(n: int, batch_size: int, gen: torch.Generator) -> torch.Tensor:
    """Row indices of one minibatch: the first batch_size of a fresh permutation drawn from gen (CPU)."""
    return torch.randperm(n, generator=gen)[:batch_size]


def make_optimizer(name: str, params, lr: float, momentum: float) -> torch.optim.Optimizer:
    """Plain SGD for gd/sgd (no weight_decay: the λ-term is in the objective), or Adam."""
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.SGD(params, lr=lr, momentum=momentum)


class Trainer:
    """Minimises data loss + λ·s·Σ‖p‖² over the train split, phase after phase."""

    def __init__(self, model: RepModel, data: DataBundle, cfg: TrainConfig, seed: int,
                 on_log: Optional[Callable[[dict], None]] = None,
                 on_checkpoint: Optional[Callable[[dict], None]] = None,
                 hook: Optional[Callable[[RepModel, int], dict]] = None, hook_every: int = 0,
                 stop_flag: Optional[StopFlag] = None):
        self.model, self.data, self.cfg, self.seed = model, data, cfg, seed
        self.on_log, self.on_checkpoint = on_log, on_checkpoint
        self.hook, self.hook_every = hook, hook_every
        self.stop_flag = stop_flag if stop_flag is not None else StopFlag()
        self.y_train = self._targets(data.y_train)
        self.y_test = self._targets(data.y_test) if data.has_test else None
        self.reg_coef = cfg.lam * reg_scale_factor(cfg.reg_scale, model.depth)
        self.pos = Position()
        self.gen = torch.Generator().manual_seed(seed)  # minibatch order
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self._good: Optional[list[torch.Tensor]] = None

    def _targets(self, y: torch.Tensor) -> torch.Tensor:
        """Class indices become one-hot rows for MSE on a classification dataset."""
        if self.cfg.loss == "mse" and self.data.task == "classification":
            return torch.nn.functional.one_hot(y, self.data.n_classes).to(self.data.x_train.dtype)
        return y

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything needed to resume: model, optimiser, position, minibatch RNG."""
        return {"model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict() if self.optimizer is not None else None,
                "position": asdict(self.pos), "generator": self.gen.get_state()}

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict()`; the optimiser state is applied when its phase starts."""
        self.model.load_state_dict(state["model"])
        self.pos = Position(**state["position"])
        self.gen.set_state(state["generator"])
        self._resume_optimizer = state.get("optimizer")

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

    # -- loop ------------------------------------------------------------------------------------
    def run(self) -> TrainResult:
        """Train from the current position until a stopping rule fires; returns why it stopped."""
        cfg, model = self.cfg, self.model
        params = [p for p in model.parameters() if p.requires_grad]
        x, y, n = self.data.x_train, self.y_train, self.data.x_train.shape[0]
        bar = tqdm(total=cfg.total_steps, initial=self.pos.step, disable=None if cfg.progress else True,
                   dynamic_ncols=True, leave=False)
        t0 = time.perf_counter()
        result = None
        try:
            while self.pos.phase < len(cfg.phases) and result is None:
                ph = cfg.phases[self.pos.phase]
                self.optimizer = make_optimizer(ph.optimizer, params, ph.lr, ph.momentum)
                saved = getattr(self, "_resume_optimizer", None)
                if saved is not None:
                    self.optimizer.load_state_dict(saved)
                    self._resume_optimizer = None
                bs = batch_size_of(ph, n)
                while self.pos.step_in_phase < ph.steps:
                    if self.stop_flag:
                        result = TrainResult("preempted", self.pos.step, f"signal {self.stop_flag.signal}")
                        break
                    lr = apply_lr(self.optimizer, ph, self.pos.step_in_phase)
                    if bs is None:
                        xb, yb = x, y
                    else:
                        idx = minibatch_indices(n, bs, self.gen).to(x.device)
                        xb, yb = x[idx], y[idx]
                    self.optimizer.zero_grad(set_to_none=True)
                    dl = data_loss(model(xb), yb, cfg.loss)
                    sq = model.param_sq_norm()
                    obj, trained = stated_and_trained(dl, sq, self.reg_coef, ph.lam_factor)  # obj: checked and logged
                    trained.backward()
                    step = self.pos.step
                    if step % cfg.check_every == 0:
                        result = self._check(step, obj, dl)
                        if result is not None:
                            break
                    if step % cfg.log_every == 0 and self.on_log is not None:
                        self._log(step, lr, obj, dl, sq, t0)
                    if self.hook is not None and self.hook_every and step % self.hook_every == 0 and step > 0:
                        rec = self.hook(model, step)
                        if rec and self.on_log is not None:
                            self.on_log({"step": step, **rec})
                    self.optimizer.step()
                    self.pos.step_in_phase += 1
                    self.pos.step += 1
                    bar.update(1)
                    if step % cfg.check_every == 0:
                        bar.set_postfix(obj=f"{obj.item():.4g}", loss=f"{dl.item():.3g}",
                                        sqnorm=f"{sq.item():.4g}", refresh=False)
                    if cfg.checkpoint_every and self.pos.step % cfg.checkpoint_every == 0 \
                            and self.on_checkpoint is not None:
                        self.on_checkpoint(self.state_dict())
                else:
                    self.pos.phase += 1
                    self.pos.step_in_phase = 0
                    self._resume_optimizer = None
        finally:
            bar.close()
        if result is None:
            result = self._final_check()
        return result

    def _check(self, step: int, obj: torch.Tensor, dl: torch.Tensor) -> Optional[TrainResult]:
        """NaN/inf, target-loss and plateau rules, evaluated every `check_every` steps."""
        cfg, o, d = self.cfg, obj.item(), dl.item()
        if not (math.isfinite(o) and math.isfinite(d)):
            last = self._restore_good()
            return TrainResult("non_finite", step, f"objective became {o} at step {step}; the model was "
                               f"restored to step {last}, the last finite state (try a smaller learning rate)")
        self._good = [p.detach().clone() for p in self.model.parameters()], step
        if cfg.target_loss is not None and d <= cfg.target_loss:
            return TrainResult("target_loss", step, f"train loss {d:.3g} <= {cfg.target_loss}")
        if cfg.plateau_window:
            if o < self.pos.best_objective * (1 - cfg.plateau_rel_tol):
                self.pos.best_objective, self.pos.best_step = o, step
            elif step - self.pos.best_step >= cfg.plateau_window:
                return TrainResult("plateau", step, f"objective improved by < {cfg.plateau_rel_tol:g} "
                                   f"(relative) over {cfg.plateau_window} steps")
        return None

    def _restore_good(self) -> int:
        if self._good is None:
            return -1
        tensors, step = self._good
        with torch.no_grad():
            for p, t in zip(self.model.parameters(), tensors):
                p.copy_(t)
        return step

    def _final_check(self) -> TrainResult:
        ev = self.evaluate()
        if not math.isfinite(ev["objective"]):
            last = self._restore_good()
            return TrainResult("non_finite", self.pos.step, f"objective became {ev['objective']} by the end; "
                               f"the model was restored to step {last}, the last finite state")
        return TrainResult("budget", self.pos.step)

    def _log(self, step: int, lr: float, obj, dl, sq, t0: float) -> None:
        rec = {"step": step, "phase": self.pos.phase, "lr": lr, "objective": obj.item(),
               "train_loss": dl.item(), "param_sq_norm": sq.item(),
               "time_s": time.perf_counter() - t0}
        if self.y_test is not None:
            with torch.no_grad():
                rec["test_loss"] = data_loss(self.model(self.data.x_test), self.y_test, self.cfg.loss).item()
        self.on_log(rec)
