"""Several seeds trained in one process as one stacked model (DESIGN.md 'Sweeps and scale').

`train.ensemble_size=K` trains members i = 0 … K−1 with seeds `seed + i`: same model config,
same data, same optimiser phases. Member i is, up to float round-off, the run `seed=seed+i`
would give alone: its initialisation comes from `build_model(..., seed + i)` and its minibatch
order from its own generator seeded with `seed + i`, drawn exactly as `Trainer` draws it.

How the members are stacked
  * Parameters: `torch.func.stack_module_state` turns K models into one tensor per parameter
    with a leading member axis; the objective is evaluated for all members at once with
    `torch.func.vmap(functional_call(...))` on the family's own `forward` and `param_sq_norm`.
    Each member's model object keeps parameters that are views into the stacked tensors, so the
    single-run `Trainer` code (stopping rules, NaN restore, evaluation, state dicts, logging) is
    reused per member without copies.
  * Gradients: the summed objective Σ_i obj_i has ∂/∂θ_i = ∂obj_i/∂θ_i, so one backward gives
    every member its own gradient. SGD (with momentum) and Adam act elementwise, so one optimiser
    over the stacked tensors equals K separate ones (same classes as `make_optimizer`, same
    `lr_at` schedule).
  * Shared input: when all members see the same rows (full-batch phases), a 2-D matmul of the
    shared input by a per-member weight is done as one GEMM over all members
    ((N, d) @ (d, K·m)), forward and backward, instead of the K-fold broadcast `bmm` that plain
    `vmap` produces (`SharedMatmul`, applied by a TorchFunctionMode to `@`/matmul/mm/F.linear
    of 2-D operands during the stacked forward; einsum, as in the `parallel` family, keeps vmap's
    own rule). Minibatch phases give every member its own rows (K, bs, d).

Stopping (per member, so each member matches its single run)
  A member stops when its own rule fires, at the step its single run would stop: the step
  budget, `target_loss`, `plateau_window`, or a non-finite objective (its parameters are then
  restored to its last finite state, as in `Trainer`). A stopped member is frozen: it still
  rides along in the stacked computation, but its parameters are put back after every optimiser
  step and its minibatch generator is not advanced (it still costs its share of compute). The
  ensemble stops when every member has stopped (or the budget ends). A member that diverges
  therefore does not cut short the others.

Outputs (in the run directory)
  members/<i>/summary.json      that member's summary: the keys of a single run's summary, with
                                its seed, and the config_hash of its single-run config (seed+i,
                                ensemble_size=1); wall_time_s is the ensemble's.
  members/<i>/checkpoint.pt     a single-run checkpoint (trainer.model/optimizer/position/generator,
                                config = the member's single-run config): loadable like a run.
  metrics.jsonl                 the single-run lines, each with `member` and `seed` fields.
  summary.json                  the best member's summary (lowest final objective among members
                                that did not fail; among all if all failed) plus `ensemble_size`,
                                `best_member`, `member_objectives`, `member_seeds`,
                                `member_status`, `failed_members`; `config_hash` and
                                `wall_time_s` are the ensemble run's. This is the min-over-trials
                                protocol of Jacot et al. 2022 (best of 3 trials per width).
  checkpoint.pt                 the stacked state under "ensemble" (resume after preemption or
                                from checkpoint_every), plus the single-run entries of the best
                                member ("trainer", member 0's while running), so repcost-analyze
                                reads the run directory as the best member.
  analysis/                     a copy of the best member's members/<i>/analysis/.

A run whose best member failed (i.e. every member failed) raises RepcostError after writing
everything, like a failed single run; otherwise failed members are reported in the summaries
and a warning.
"""

from __future__ import annotations

import copy
import logging
import math
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from torch.overrides import TorchFunctionMode
from tqdm.auto import tqdm

from ..config.schema import RunSpec, TrainConfig
from ..data.bundle import DataBundle
from ..errors import RepcostError
from ..models.base import RepModel
from .loop import Position, Trainer, TrainResult, batch_size_of, make_optimizer, minibatch_indices
from .objective import data_loss, stated_and_trained
from .preempt import StopFlag
from .schedule import apply_lr

log = logging.getLogger("repcost")

MEMBERS = "members"


# -- one GEMM for a shared input times per-member weights ----------------------------------------
class SharedMatmul(torch.autograd.Function):
    """a @ b for 2-D a, b. Under vmap, an unbatched operand times a batched one is one GEMM.

    vmap's own rule for matmul(unbatched (N, d), batched (K, d, m)) expands the unbatched operand
    to (K, N, d) and calls bmm, forward and backward; here it becomes (N, d) @ (d, K·m). The
    backward calls this function again, so the weight gradient Xᵀ·G is also one GEMM.
    """

    @staticmethod
    def forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        a, b = ctx.saved_tensors
        ga = SharedMatmul.apply(g, b.mT) if ctx.needs_input_grad[0] else None
        gb = SharedMatmul.apply(a.mT, g) if ctx.needs_input_grad[1] else None
        return ga, gb

    @staticmethod
    def vmap(info, in_dims, a: torch.Tensor, b: torch.Tensor):
        ad, bd = in_dims
        if ad is None and bd is not None:  # shared a (N, d), per-member b (K, d, m)
            b = b.movedim(bd, 0)
            k, d, m = b.shape
            out = a @ b.permute(1, 0, 2).reshape(d, k * m)
            return out.reshape(a.shape[0], k, m).movedim(1, 0), 0
        if ad is not None and bd is None:  # per-member a (K, n, d), shared b (d, m)
            a = a.movedim(ad, 0)
            k, n, d = a.shape
            return (a.reshape(k * n, d) @ b).reshape(k, n, b.shape[1]), 0
        return torch.matmul(a.movedim(ad, 0), b.movedim(bd, 0)), 0


_MATMULS = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm}


class _ShareMatmuls(TorchFunctionMode):
    """Routes 2-D × 2-D matmuls (and F.linear) of a shared by a per-member operand through SharedMatmul."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _MATMULS and len(args) == 2 and not kwargs and _one_shared(args[0], args[1]):
            return SharedMatmul.apply(args[0], args[1])
        if func is torch.nn.functional.linear and len(args) >= 2 and _one_shared(args[0], args[1]):
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            out = SharedMatmul.apply(args[0], args[1].mT)
            return out if bias is None else out + bias
        return func(*args, **kwargs)


try:
    _is_batched = torch._C._functorch.is_batchedtensor  # inside vmap: carries a member axis
except AttributeError:  # pragma: no cover - a torch without it: route every 2-D matmul (still exact)
    _is_batched = None


def _one_shared(a, b) -> bool:
    """Both 2-D tensors (per member) and exactly one of them shared by all members."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == 2 and b.dim() == 2):
        return False
    return _is_batched is None or _is_batched(a) != _is_batched(b)


class _Terms(nn.Module):
    """Wraps a model so that one functional call returns (f(x), Σ‖p‖²) with the family's own code."""

    def __init__(self, model: RepModel):
        super().__init__()
        self.m = model

    def forward(self, x: torch.Tensor):
        return self.m(x), self.m.param_sq_norm()


# -- the stacked trainer -------------------------------------------------------------------------
class EnsembleTrainer:
    """Trains K models of one shape as one stacked model; member i behaves as Trainer(models[i], seeds[i]).

    `members[i]` is a `Trainer` whose model's parameters are views into the stacked tensors: it
    holds member i's position, minibatch generator, plateau state and last finite state, and its
    `evaluate()` / `state_dict()` are those of a single run. `on_log` receives the single-run
    metrics records with `member` and `seed` added; `hooks[i]` is member i's periodic analysis.
    """

    def __init__(self, models: Sequence[RepModel], data: DataBundle, cfg: TrainConfig, seeds: Sequence[int],
                 on_log: Optional[Callable[[dict], None]] = None,
                 on_checkpoint: Optional[Callable[[dict], None]] = None,
                 hooks: Optional[Sequence[Optional[Callable]]] = None, hook_every: int = 0,
                 stop_flag: Optional[StopFlag] = None, share_matmuls: bool = True):
        if len(models) != len(seeds) or not models:
            raise ValueError(f"need one seed per model, got {len(models)} models and {len(seeds)} seeds")
        if len({type(m) for m in models}) != 1:
            raise RepcostError("ensemble members must be models of one family")
        self.K, self.cfg, self.data, self.seeds = len(models), cfg, data, list(seeds)
        self.on_checkpoint, self.share_matmuls = on_checkpoint, share_matmuls
        self.stop_flag = stop_flag if stop_flag is not None else StopFlag()
        hooks = list(hooks) if hooks is not None else [None] * self.K
        self.members = [Trainer(m, data, cfg, s, on_log=_tagged(on_log, i, s), hook=hooks[i], hook_every=hook_every,
                                stop_flag=self.stop_flag) for i, (m, s) in enumerate(zip(models, seeds))]
        self._terms = _Terms(copy.deepcopy(models[0]))  # the functional template (its own values unused)
        params, buffers = stack_module_state(list(models))
        self.state = {f"m.{k}": v for k, v in {**params, **buffers}.items()}
        for i, m in enumerate(models):  # member i's tensors become views of slice i of the stack
            for k, v in params.items():
                m.get_parameter(k).data = v.detach()[i]
            for k, v in buffers.items():
                m.get_buffer(k).data = v.detach()[i]
        self.params = [v for v in params.values() if v.requires_grad]  # = Trainer's parameter order
        self.pos = Position()
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self._resume_optimizer: Optional[dict] = None
        self.results: list[Optional[TrainResult]] = [None] * self.K
        self._frozen: dict[int, list[torch.Tensor]] = {}  # stopped member -> its parameters at the stop
        self._member_opt: dict[int, Optional[dict]] = {}  # stopped member -> its optimiser state at the stop

    @property
    def active(self) -> list[int]:
        """Members still training."""
        return [i for i in range(self.K) if self.results[i] is None]

    # -- the stacked objective -----------------------------------------------------------------
    def terms(self, x: torch.Tensor, y: torch.Tensor, batched: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-member data loss and Σ‖p‖² (each (K,)); x, y shared or (K, …) when `batched`."""
        loss = self.cfg.loss

        def one(state, xb, yb):
            out, sq = functional_call(self._terms, state, (xb,))
            return data_loss(out, yb, loss), sq

        d = 0 if batched else None
        f = vmap(one, in_dims=(0, d, d))
        if self.share_matmuls:
            with _ShareMatmuls():
                return f(self.state, x, y)
        return f(self.state, x, y)

    # -- state ---------------------------------------------------------------------------------
    def member_optimizer_state(self, i: int) -> Optional[dict]:
        """Member i's slice of the stacked optimiser state, in a single run's optimizer.state_dict() format."""
        if i in self._member_opt:
            return self._member_opt[i]
        if self.optimizer is None:
            return None
        sd = self.optimizer.state_dict()
        return {"state": {j: {k: (v[i].clone() if torch.is_tensor(v) and v.dim() > 0 else copy.deepcopy(v))
                              for k, v in s.items()} for j, s in sd["state"].items()},
                "param_groups": copy.deepcopy(sd["param_groups"])}

    def member_state_dict(self, i: int) -> dict:
        """Member i's state in the single-run `Trainer.state_dict()` format (tensors copied out of the stack)."""
        st = self.members[i].state_dict()
        st["model"] = {k: v.clone() for k, v in st["model"].items()}
        st["optimizer"] = self.member_optimizer_state(i)
        return st

    def state_dict(self) -> dict:
        """Everything needed to resume the ensemble."""
        return {"members": [{**self.members[i].state_dict(), "optimizer": self._member_opt.get(i),
                             "model": {k: v.clone() for k, v in self.members[i].model.state_dict().items()}}
                            for i in range(self.K)],
                "optimizer": self.optimizer.state_dict() if self.optimizer is not None else None,
                "position": asdict(self.pos),
                "results": [asdict(r) if r is not None and r.stop_reason != "preempted" else None
                            for r in self.results]}  # a preempted member goes on when resumed

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict()`; the stacked optimiser state is applied when its phase starts."""
        for i, (tr, st) in enumerate(zip(self.members, state["members"])):
            tr.load_state_dict(st)  # copies into the stacked tensors through the views
            tr._resume_optimizer = None
        self.pos = Position(**state["position"])
        self._resume_optimizer = state.get("optimizer")
        for i, r in enumerate(state["results"]):
            if r is not None:
                self._stop(i, TrainResult(**r), opt_state=state["members"][i].get("optimizer"))

    def unstack(self) -> None:
        """Give every member model its own parameter storage (after training; the stack is left as is)."""
        with torch.no_grad():
            for tr in self.members:
                for t in list(tr.model.parameters()) + list(tr.model.buffers()):
                    t.data = t.data.clone()

    # -- per-member stopping -------------------------------------------------------------------
    def _stop(self, i: int, result: TrainResult, opt_state: Optional[dict] = None) -> None:
        """Freeze member i at its current parameters (already restored if it went non-finite)."""
        self._member_opt[i] = opt_state if opt_state is not None else self.member_optimizer_state(i)
        self.results[i] = result
        self._frozen[i] = [p.detach().clone() for p in self.members[i].model.parameters()]

    @torch.no_grad()
    def _hold_frozen(self) -> None:
        for i, saved in self._frozen.items():
            for p, t in zip(self.members[i].model.parameters(), saved):
                p.copy_(t)

    # -- loop ----------------------------------------------------------------------------------
    def run(self) -> list[TrainResult]:
        """Train from the current position until every member has stopped; returns each member's result."""
        cfg = self.cfg
        x, n = self.data.x_train, self.data.x_train.shape[0]
        y = self.members[0].y_train
        reg_coef = self.members[0].reg_coef
        bar = tqdm(total=cfg.total_steps, initial=self.pos.step, disable=None if cfg.progress else True,
                   dynamic_ncols=True, leave=False)
        t0 = time.perf_counter()
        try:
            while self.pos.phase < len(cfg.phases) and self.active:
                ph = cfg.phases[self.pos.phase]
                self.optimizer = make_optimizer(ph.optimizer, self.params, ph.lr, ph.momentum)
                if self._resume_optimizer is not None:
                    self.optimizer.load_state_dict(self._resume_optimizer)
                    self._resume_optimizer = None
                bs = batch_size_of(ph, n)
                while self.pos.step_in_phase < ph.steps:
                    active = self.active
                    if not active:
                        break
                    if self.stop_flag:
                        for i in active:
                            self.results[i] = TrainResult("preempted", self.pos.step, f"signal {self.stop_flag.signal}")
                        break
                    lr = apply_lr(self.optimizer, ph, self.pos.step_in_phase)
                    if bs is None:
                        dl, sq = self.terms(x, y, batched=False)
                    else:  # each active member draws its own rows from its own generator, as Trainer does
                        idx = torch.stack([minibatch_indices(n, bs, self.members[i].gen) if self.results[i] is None
                                           else torch.arange(bs) for i in range(self.K)]).to(x.device)
                        dl, sq = self.terms(x[idx], y[idx], batched=True)
                    self.optimizer.zero_grad(set_to_none=True)
                    obj, trained = stated_and_trained(dl, sq, reg_coef, ph.lam_factor)  # obj: checked and logged
                    trained.sum().backward()
                    step = self.pos.step
                    check = step % cfg.check_every == 0
                    logs = step % cfg.log_every == 0 and self.members[0].on_log is not None
                    vals = torch.stack([obj, dl, sq]).detach().cpu() if check or logs else None
                    if check:
                        for i in active:
                            r = self.members[i]._check(step, vals[0, i], vals[1, i])
                            if r is not None:
                                self._stop(i, r)
                        active = self.active
                    if logs:
                        for i in active:
                            self.members[i]._log(step, lr, vals[0, i], vals[1, i], vals[2, i], t0)
                    for i in active:
                        tr = self.members[i]
                        if tr.hook is not None and tr.hook_every and step % tr.hook_every == 0 and step > 0:
                            rec = tr.hook(tr.model, step)
                            if rec and tr.on_log is not None:
                                tr.on_log({"step": step, **rec})
                    if not active:
                        break
                    self.optimizer.step()
                    if self._frozen:
                        self._hold_frozen()
                    self.pos.step_in_phase += 1
                    self.pos.step += 1
                    for i in active:
                        self.members[i].pos.step_in_phase += 1
                        self.members[i].pos.step += 1
                    bar.update(1)
                    if check:
                        best = min(vals[0, i].item() for i in active)
                        bar.set_postfix(best_obj=f"{best:.4g}", active=f"{len(active)}/{self.K}", refresh=False)
                    if cfg.checkpoint_every and self.pos.step % cfg.checkpoint_every == 0 \
                            and self.on_checkpoint is not None:
                        self.on_checkpoint(self.state_dict())
                else:
                    self.pos.phase += 1
                    self.pos.step_in_phase = 0
                    for i in self.active:
                        self.members[i].pos.phase += 1
                        self.members[i].pos.step_in_phase = 0
                    continue
                break  # the inner loop broke: everyone stopped, or preempted
        finally:
            bar.close()
        for i in self.active:  # the budget ran out
            self._stop(i, self.members[i]._final_check())
        return list(self.results)


def _tagged(on_log, i: int, seed: int):
    if on_log is None:
        return None
    return lambda rec: on_log({**rec, "member": i, "seed": seed})


# -- one ensemble run end to end -----------------------------------------------------------------
def member_config(cfg_dict: dict, seed: int) -> dict:
    """The single-run config of a member: the ensemble's with `seed` and train.ensemble_size = 1."""
    d = copy.deepcopy(cfg_dict)
    d["seed"] = seed
    d.setdefault("train", {})["ensemble_size"] = 1
    return d


def run_ensemble(spec: RunSpec, cfg_dict: dict, run_dir: Path, stop_flag: Optional[StopFlag] = None,
                 chash: Optional[str] = None) -> dict:
    """Train seeds spec.seed … spec.seed+K−1 (K = train.ensemble_size) as one stacked model; the top summary.

    Follows `run_training`'s run-directory protocol: checkpoint.pt (here holding the stacked
    state under "ensemble", plus a single-run "trainer" entry: member 0 while running, the best
    member at the end) makes the directory resumable; FINISHED (holding the config hash) is
    written last on success; a run whose every member failed raises RepcostError.
    """
    from omegaconf import OmegaConf

    from ..analysis.hooks import AnalysisRunner
    from ..data import load_data
    from ..models import build_model
    from ..runio import atomic_torch_save, atomic_write_bytes, atomic_write_json, config_hash, git_commit
    from .run import (CHECKPOINT, FINISHED, METRICS, SUMMARY, MetricsWriter, resume_or_clear, run_resumable,
                      run_summary)

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if chash is None:
        chash, member_hash = config_hash(cfg_dict), config_hash
    else:  # the CLI hashes the result-defining part of the config; hash members the same way
        from ..cli.train import identity
        member_hash = lambda d: config_hash(identity(d))  # noqa: E731
    t_start = time.perf_counter()
    device, dtype = torch.device(spec.device), spec.torch_dtype
    K = spec.train.ensemble_size
    seeds = [spec.seed + i for i in range(K)]
    member_cfgs = [member_config(cfg_dict, s) for s in seeds]
    member_dirs = [run_dir / MEMBERS / str(i) for i in range(K)]

    data = load_data(spec.data)
    if spec.train.loss == "cross_entropy" and data.task != "classification":
        raise RepcostError(f"train.loss=cross_entropy needs a classification dataset; data={data.name} is regression")
    models = [build_model(spec.model, data.d_in, data.d_out, s).to(device=device, dtype=dtype) for s in seeds]
    data = data.to(dtype, device)
    family = models[0].family

    ckpt_path = run_dir / CHECKPOINT
    resume = resume_or_clear(run_dir, chash)
    if resume is None and (run_dir / MEMBERS).is_dir():
        shutil.rmtree(run_dir / MEMBERS)  # a previous attempt's member outputs
    runners = [AnalysisRunner(spec.analysis, m, data, d) for m, d in zip(models, member_dirs)]
    metrics = MetricsWriter(run_dir / METRICS, keep_before=resume["ensemble"]["position"]["step"] if resume else 0)

    et = EnsembleTrainer(models, data, spec.train, seeds, on_log=metrics,
                         hooks=[r.periodic if r.enabled_periodic else None for r in runners],
                         hook_every=spec.analysis.every, stop_flag=stop_flag)

    def save(status: str, trainer_state: dict, wall: Optional[float] = None, ensemble_state: Optional[dict] = None,
             **extra) -> None:
        ck = {"trainer": trainer_state, "ensemble": ensemble_state if ensemble_state is not None else et.state_dict(),
              "config_hash": chash, "status": status,
              "family": family, "config": cfg_dict, **extra}
        if wall is not None:
            ck["wall_time_s"] = wall
        atomic_torch_save(ckpt_path, ck)

    et.on_checkpoint = lambda state: save("running", et.member_state_dict(0), ensemble_state=state)
    wall_before = float(resume.get("wall_time_s", 0.0)) if resume is not None else 0.0
    results = run_resumable(et, resume["ensemble"] if resume is not None else None, wall_before, metrics, run_dir)

    wall = wall_before + time.perf_counter() - t_start
    statuses = [r.status for r in results]
    if "preempted" in statuses:
        save("preempted", et.member_state_dict(0), wall)
        log.warning("preempted at step %d; checkpoint saved, relaunch to resume", et.pos.step)
        return {"status": "preempted", "steps": et.pos.step, "ensemble_size": K}

    et.unstack()
    commit = git_commit()
    summaries, member_ckpts = [], []
    for i, (tr, r, status) in enumerate(zip(et.members, results, statuses)):
        model = tr.model
        summary = run_summary(tr, r, wall, spec, seeds[i], member_hash(member_cfgs[i]), commit, data.name)
        if status == "finished":
            summary.update(runners[i].final(model))
        ckpt = {"trainer": et.member_state_dict(i), "config_hash": summary["config_hash"], "status": status,
                "family": model.family, "config": member_cfgs[i], "wall_time_s": wall}
        atomic_write_bytes(member_dirs[i] / ".hydra" / "config.yaml",
                           OmegaConf.to_yaml(OmegaConf.create(member_cfgs[i])).encode())
        atomic_torch_save(member_dirs[i] / CHECKPOINT, ckpt)
        atomic_write_json(member_dirs[i] / SUMMARY, summary)
        summaries.append(summary)
        member_ckpts.append(ckpt)

    objectives = [s["objective"] for s in summaries]
    ok = [i for i in range(K) if statuses[i] == "finished"] or list(range(K))
    best = min(ok, key=lambda i: objectives[i] if math.isfinite(objectives[i]) else math.inf)
    failed = [i for i in range(K) if statuses[i] == "failed"]
    top = {**summaries[best], "ensemble_size": K, "best_member": best, "member_objectives": objectives,
           "member_seeds": seeds, "member_status": statuses, "failed_members": failed,
           "config_hash": chash, "wall_time_s": wall}
    save(top["status"], member_ckpts[best]["trainer"], wall, best_member=best)
    if (member_dirs[best] / "analysis").is_dir():  # the best member's arrays/tables, where a single run has them
        shutil.copytree(member_dirs[best] / "analysis", run_dir / "analysis", dirs_exist_ok=True)
    atomic_write_json(run_dir / SUMMARY, top)
    if top["status"] == "failed":
        raise RepcostError(f"run failed: every ensemble member failed (member 0: {results[0].message}); "
                           f"summaries and checkpoints in {run_dir}")
    if failed:
        log.warning("ensemble members %s failed (%s); the best member is %d (seed %d)", failed,
                    "; ".join(f"{i}: {results[i].message}" for i in failed), best, seeds[best])
    atomic_write_bytes(run_dir / FINISHED, (chash + "\n").encode())
    return top
