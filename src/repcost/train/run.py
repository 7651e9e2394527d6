"""One run end to end: data, model(s), training, outputs (docs/ARCHITECTURE.md, "The path of one run").

`run_training` serves a single run (K = 1) and an ensemble of K stacked members alike; both go
through the same run-directory protocol (`repcost.rundir.RunDir`): lock, decide (skip a
finished run, resume a checkpoint, move aside what is in the way), train, write. `train_jobs`
is the one single-run path, for one run or several stacked ones (`train.stacked.run_stacked`).

Ensemble outputs (K = `train.ensemble_size` > 1, seeds seed … seed+K−1)
  members/<i>/        a single run's files for member i (.hydra/config.yaml, checkpoint.pt,
                      summary.json with the config_hash of its own single-run config, analysis/)
  metrics.jsonl       the single-run lines, each with `member` and `seed`
  summary.json        the best member's summary (lowest final objective among members that did
                      not fail) plus ensemble_size, best_member, member_objectives, member_seeds,
                      member_status, failed_members (Jacot et al. 2022's min-over-trials protocol)
  checkpoint.pt       the stacked state under "ensemble" plus the best member's single-run entry
  analysis/           a copy of the best member's
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import OmegaConf

from ..config.schema import RunSpec
from ..data import load_data
from ..errors import RepcostError
from ..identity import member_config, run_hash
from ..models import build_model
from ..rundir import CHECKPOINT, ERROR, MEMBERS, SUMMARY, RunDir
from ..runio import git_commit
from .preempt import StopFlag, stop_on_signals

log = logging.getLogger("repcost")


# -- deciding what to do with a run directory ----------------------------------------------------
def _has_identity(ck: dict, chash: str) -> bool:
    """Whether a checkpoint is of the run with identity `chash`: by its stored hash, or, for runs whose stored
    hash comes from an earlier version of the identity rules, by the config saved with it."""
    if ck.get("config_hash") == chash:
        return True
    cfg = ck.get("config")
    try:
        return isinstance(cfg, dict) and run_hash(cfg) == chash
    except RepcostError:  # a config of a family or dataset that no longer exists
        return False


def _finished_identity(rd: RunDir, chash: str) -> bool:
    """Whether the finished run in `rd` has identity `chash` (its FINISHED marker may hold an older hash)."""
    if rd.finished_hash() == chash:
        return True
    try:
        return _has_identity(rd.load_checkpoint(), chash)
    except RepcostError:
        return False


def open_run(rd: RunDir, chash: str, force: bool = False, on_stale: str = "refuse") -> tuple[str, dict | None]:
    """What to do in `rd` for a config of identity `chash`: ("finished", None), ("resume", ckpt) or ("fresh", None).

    Never deletes: a run in the way is moved aside (`RunDir.move_aside`). A finished run of another
    config is refused (RepcostError) unless `force` or `on_stale="move"` (sweep jobs, whose
    directories are named by their overrides, so an edited preset lands on its old jobs).
    """
    rd.remove_temp_files()
    if force and rd.has_results():
        aside = rd.move_aside("force=true")
        log.warning("force=true: the previous run in %s was moved to %s", rd.path, aside)
        return "fresh", None
    fh = rd.finished_hash()
    if fh is not None:
        if _finished_identity(rd, chash):
            return "finished", None
        if on_stale != "move":
            raise RepcostError(f"{rd.path} holds a finished run of another config (hash {fh}; this config {chash}); "
                               "finished results are never overwritten: use another directory, or force=true to "
                               "move the old run aside")
        aside = rd.move_aside(f"finished run of another config (hash {fh}; replaced by {chash})")
        log.warning("the finished run in %s had another config; moved to %s", rd.path, aside)
        return "fresh", None
    if rd.file(ERROR).exists():
        aside = rd.move_aside("a failed attempt")
        log.warning("the failed attempt in %s was moved to %s; starting over", rd.path, aside)
        return "fresh", None
    if rd.file(CHECKPOINT).exists():
        ck = rd.load_checkpoint()  # an unreadable checkpoint is a one-line error naming it
        same = _has_identity(ck, chash)
        if same and ck.get("status") in ("running", "preempted"):
            return "resume", ck
        aside = rd.move_aside(f"unfinished run of another config (hash {ck.get('config_hash')})" if not same
                              else f"a {ck.get('status')} attempt")
        log.warning("the unfinished run in %s was moved to %s", rd.path, aside)
        return "fresh", None
    if rd.has_results():
        rd.move_aside("leftovers without a checkpoint")
    return "fresh", None


# -- summaries and figures -----------------------------------------------------------------------
def run_summary(member, result, wall: float, spec: RunSpec, seed: int, chash: str, commit: str,
                data_name: str) -> dict:
    """summary.json of one trained model: final objective terms, cost, stop reason, provenance."""
    from ..analysis.certificate import critical_point_certificate

    model, ev = member.model, member.evaluate()
    cfg = spec.train
    cert = critical_point_certificate(model, member.data.x_train, member.y_train, cfg.loss, cfg.lam, cfg.reg_scale,
                                      descent_evals=cfg.certify_descent)
    return {
        **ev,
        **{f"cert.{k}": v for k, v in cert.items() if k != "critical_point"},
        "critical_point": cert["critical_point"],
        "param_sq_norm_per_depth": ev["param_sq_norm"] / model.depth,
        "cost": float(model.cost().detach()),
        "depth": model.depth,
        "steps": member.pos.step,
        "stop_reason": result.stop_reason,
        "status": result.status,
        "message": result.message,
        "wall_time_s": wall,
        "device": str(torch.device(spec.device)),
        "dtype": spec.dtype,
        "seed": seed,
        "git_commit": commit,
        "config_hash": chash,
        "model": model.family,
        "data": data_name,
    }


def _plot_fit_1d(model, data, path: Path, summary: dict) -> None:
    """figures/fit.png: the learned 1-D function over the data range (and a margin) with the points."""
    import matplotlib.pyplot as plt

    from ..plots.fit_1d import fit_1d_figure

    x = data.x_train[:, 0].detach().cpu().double()
    lo, hi = float(x.min()), float(x.max())
    pad = 0.25 * (hi - lo or 1.0)
    grid = torch.linspace(lo - pad, hi + pad, 600, dtype=data.x_train.dtype, device=data.x_train.device)
    with torch.no_grad():
        f = model(grid[:, None])[:, 0].cpu().double().numpy()
    fig = fit_1d_figure(grid.cpu().double().numpy(), f, x.numpy(), data.y_train[:, 0].cpu().double().numpy(),
                        f"{model.family} L={model.depth}: train loss {summary['train_loss']:.3g}, "
                        f"cost {summary['cost']:.4g}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- training --------------------------------------------------------------------------------------
def fast_step_options(cfg, device: torch.device, K: int, n: int, model) -> dict:
    """compiled/graphed for the trainers, from train.compile and train.cuda_graphs (train.step's rules)."""
    from .step import use_compile, use_graphs

    n_params = sum(p.numel() for p in model.parameters())
    return {"compiled": use_compile(cfg.compile, device, cfg.total_steps, K, n, n_params),
            "graphed": use_graphs(cfg.cuda_graphs, device)}


class _Tee:
    """One metrics record to the run's metrics.jsonl and to an experiment tracker."""

    def __init__(self, writer, also: Callable[[dict], None]):
        self.writer, self.also = writer, also

    def __call__(self, rec: dict) -> None:
        self.writer(rec)
        self.also(rec)

    def close(self) -> None:
        self.writer.close()


@dataclass
class RunJob:
    """One run directory opened for training (locked, `open_run` decided): its config, identity and checkpoint."""

    spec: RunSpec
    cfg_dict: dict
    rd: RunDir
    chash: str
    resume: dict | None = None  # the checkpoint to resume, None for a fresh start

    @property
    def wall_before(self) -> float:
        """Training time spent before this process (from the checkpoint)."""
        return float(self.resume.get("wall_time_s", 0.0)) if self.resume is not None else 0.0

    @property
    def start(self) -> tuple[int, int, int]:
        """(phase, step in phase, step) where training starts: runs stacked in one process must share it."""
        if self.resume is None:
            return (0, 0, 0)
        p = self.resume["ensemble" if "ensemble" in self.resume else "trainer"]["position"]
        return (p["phase"], p["step_in_phase"], p["step"])


def run_training(spec: RunSpec, cfg_dict: dict, run_dir: Path, stop_flag: StopFlag | None = None,
                 chash: str | None = None, force: bool = False, on_stale: str = "refuse",
                 before_start: Callable[[RunDir], None] | None = None) -> dict:
    """Train the run described by `spec` in `run_dir`; returns its summary.

    A finished run of the same identity is not retrained (its summary is returned, with
    `"reused": True`); a preempted one resumes from its checkpoint. `before_start(run_dir)` runs
    once the directory is ready and before training (the CLI writes `.hydra/` there).
    Several runs differing only in seed, λ, learning rates and init scale: `train.stacked.run_stacked`.
    """
    rd = RunDir(run_dir)
    chash = chash or run_hash(cfg_dict)
    with rd.locked():
        what, resume = open_run(rd, chash, force=force, on_stale=on_stale)
        if what == "finished":
            return {**rd.summary(), "reused": True}
        if before_start is not None:
            before_start(rd)
        job = RunJob(spec, cfg_dict, rd, chash, resume)
        if spec.train.ensemble_size > 1:
            return _train_ensemble(job, stop_flag)
        out = train_jobs([job], stop_flag)[0]
        if isinstance(out, Exception):
            raise out
        return out


# -- pieces shared by single runs, stacked runs and ensembles ------------------------------------
def _load_data(spec: RunSpec):
    data = load_data(spec.data)
    if spec.train.loss == "cross_entropy" and data.task != "classification":
        raise RepcostError(f"train.loss=cross_entropy needs a classification dataset; data={data.name} is regression")
    return data


def _metrics(rd: RunDir, spec: RunSpec, keep_before: int):
    """(metrics writer, TensorBoard logger or None) of a run directory."""
    metrics, tracker = rd.metrics(keep_before=keep_before), None
    if spec.logger == "tensorboard":  # optional: the metrics records also go to TensorBoard
        from ..loggers import TensorBoardLogger

        tracker = TensorBoardLogger(rd.path)
        metrics = _Tee(metrics, tracker.log)
    return metrics, tracker


def _checkpoint(state: dict, job: RunJob, status: str, wall: float, family: str) -> dict:
    """A single run's checkpoint.pt: the trainer state plus what identifies and resumes it."""
    return {"trainer": state, "config_hash": job.chash, "status": status, "family": family,
            "config": job.cfg_dict, "wall_time_s": wall}


def _hand_back(flag) -> None:
    hand_back = getattr(flag, "hand_back", None)
    if hand_back is not None:
        hand_back()  # a launcher's own handler (submitit: requeue and exit) now that the checkpoints are safe


# -- single runs (one, or several stacked) ---------------------------------------------------------
def train_jobs(jobs: Sequence[RunJob], stop_flag: StopFlag | None = None) -> list[dict | Exception]:
    """Train opened single runs in one process (K = 1: `Trainer`; K > 1: one stacked `EnsembleTrainer`).

    The runs must differ only in stackable keys (`train.stacked`) and start at the same position.
    Each run's directory gets exactly its single run's files (`_complete`); a preempted run gets a
    checkpoint with status `preempted`. Returns per run its summary, `{"status": "preempted", ...}`,
    or the RepcostError its single run raises (a failed run: error.txt is written).
    """
    from ..analysis.hooks import AnalysisRunner  # analysis builds on models; import lazily
    from .engine import Position
    from .ensemble import EnsembleTrainer
    from .loop import Trainer

    t_start = time.perf_counter()
    spec, K = jobs[0].spec, len(jobs)
    if len({j.start for j in jobs}) > 1:
        raise RepcostError(f"stacked runs must start at one position, not {sorted({j.start for j in jobs})}")
    device, dtype = torch.device(spec.device), spec.torch_dtype
    data = _load_data(spec)
    models = [build_model(j.spec.model, data.d_in, data.d_out, j.spec.seed, data.x_train).to(device=device, dtype=dtype)
              for j in jobs]
    data = data.to(dtype, device)
    family = models[0].family
    runners = [AnalysisRunner(j.spec.analysis, m, data, j.rd.path) for m, j in zip(models, jobs)]
    outs = [_metrics(j.rd, j.spec, j.start[2]) for j in jobs]
    hooks = [r.periodic if r.enabled_periodic else None for r in runners]
    fast = fast_step_options(spec.train, device, K, data.x_train.shape[0], models[0])
    if K == 1:
        trainer = Trainer(models[0], data, spec.train, spec.seed, on_log=outs[0][0], hook=hooks[0],
                          hook_every=spec.analysis.every, stop_flag=stop_flag, **fast)
        if jobs[0].resume is not None:
            trainer.load_state_dict(jobs[0].resume["trainer"])
    else:
        def on_log(rec: dict) -> None:  # member i's record, as its single run logs it, to its own metrics.jsonl
            i = rec.pop("member")
            rec.pop("seed", None)
            outs[i][0](rec)

        trainer = EnsembleTrainer(models, data, spec.train, [j.spec.seed for j in jobs], on_log=on_log, hooks=hooks,
                                  hook_every=spec.analysis.every, stop_flag=stop_flag,
                                  member_cfgs=[j.spec.train for j in jobs], **fast)
        for i, j in enumerate(jobs):  # each from its own single-run checkpoint, at the common position
            if j.resume is not None:
                trainer.members[i].load_state_dict(j.resume["trainer"])
                trainer.engine.resume_member_optimizers[i] = j.resume["trainer"].get("optimizer")
        trainer.engine.pos = Position(*jobs[0].start)

    def wall(i: int) -> float:
        return jobs[i].wall_before + time.perf_counter() - t_start

    def periodic() -> None:  # members still training; a stopped one is written when the process ends
        for i, j in enumerate(jobs):
            if trainer.members[i].result is None:
                j.rd.save_checkpoint(_checkpoint(trainer.member_state_dict(i), j, "running", wall(i), family))

    trainer.engine.on_checkpoint = periodic
    for j in jobs:
        if j.resume is not None:
            log.info("resuming %s from step %d (%.0f s trained before)", j.rd.path, j.start[2], j.wall_before)
    try:
        with stop_on_signals(trainer.stop_flag):
            results = trainer.run_all()
    finally:
        for metrics, _ in outs:
            metrics.close()

    elapsed = time.perf_counter() - t_start  # the training time of every run of this process
    if K > 1:
        trainer.unstack()
    commit = git_commit()
    out: list[dict | Exception] = []
    for i, (j, member, r) in enumerate(zip(jobs, trainer.members, results)):
        w = j.wall_before + elapsed
        if r.status == "preempted":
            j.rd.save_checkpoint(_checkpoint(trainer.member_state_dict(i), j, "preempted", w, family))
            out.append({"status": "preempted", "steps": member.pos.step})
        else:
            out.append(_complete(j, member, r, trainer.member_state_dict(i), runners[i], outs[i][1], data, family,
                                 w, commit))
    preempted = [r for r in results if r.status == "preempted"]
    if preempted:
        log.warning("preempted (%s) at step %d; checkpoint saved, relaunch to resume", preempted[0].message,
                    trainer.pos.step)
        _hand_back(trainer.stop_flag)
    return out


def _complete(job: RunJob, member, result, state: dict, runner, tracker, data, family: str, wall: float,
              commit: str) -> dict | RepcostError:
    """A single run's final files: summary.json (final analyses included), checkpoint.pt, figures/fit.png,
    then FINISHED, or error.txt for a failed run (returned as the RepcostError its run raises)."""
    summary = run_summary(member, result, wall, job.spec, member.seed, job.chash, commit, data.name)
    if result.status == "finished":
        summary.update(runner.final(member.model))
    job.rd.save_checkpoint(_checkpoint(state, job, result.status, wall, family))
    if result.status == "finished" and data.task == "regression" and data.d_in == 1 and data.d_out == 1:
        _plot_fit_1d(member.model, data, job.rd.path / "figures" / "fit.png", summary)
    job.rd.write_json(SUMMARY, summary)
    if tracker is not None:
        tracker.hparams(job.cfg_dict, summary)
        tracker.close()
    if result.status == "failed":
        job.rd.record_failure(result.message)
        return RepcostError(f"run failed: {result.message}; summary and checkpoint in {job.rd.path} "
                            "(a relaunch starts over)")
    job.rd.mark_finished(job.chash)
    return summary


# -- ensembles (train.ensemble_size = K > 1 in one run directory) ---------------------------------
def _train_ensemble(job: RunJob, stop_flag: StopFlag | None) -> dict:
    from ..analysis.hooks import AnalysisRunner
    from .ensemble import EnsembleTrainer

    t_start = time.perf_counter()
    spec, cfg_dict, rd, chash, resume = job.spec, job.cfg_dict, job.rd, job.chash, job.resume
    device, dtype = torch.device(spec.device), spec.torch_dtype
    K = spec.train.ensemble_size
    seeds = [spec.seed + i for i in range(K)]
    data = _load_data(spec)
    models = [build_model(spec.model, data.d_in, data.d_out, s, data.x_train).to(device=device, dtype=dtype)
              for s in seeds]
    data = data.to(dtype, device)
    family = models[0].family
    member_dirs = [RunDir(rd.path / MEMBERS / str(i)) for i in range(K)]
    runners = [AnalysisRunner(spec.analysis, m, data, d.path) for m, d in zip(models, member_dirs)]
    metrics, tracker = _metrics(rd, spec, job.start[2])
    hooks = [r.periodic if r.enabled_periodic else None for r in runners]
    fast = fast_step_options(spec.train, device, K, data.x_train.shape[0], models[0])
    trainer = EnsembleTrainer(models, data, spec.train, seeds, on_log=metrics, hooks=hooks,
                              hook_every=spec.analysis.every, stop_flag=stop_flag, **fast)

    def wall() -> float:
        return job.wall_before + time.perf_counter() - t_start

    def checkpoint(status: str, best: int = 0) -> dict:
        return {**_checkpoint(trainer.member_state_dict(best), job, status, wall(), family),
                "ensemble": trainer.state_dict()}

    trainer.engine.on_checkpoint = lambda: rd.save_checkpoint(checkpoint("running"))
    if resume is not None:
        trainer.load_state_dict(resume["ensemble"])
        log.info("resuming %s from step %d (%.0f s trained before)", rd.path, trainer.pos.step, job.wall_before)
    try:
        with stop_on_signals(trainer.stop_flag):
            results = trainer.run_all()
    finally:
        metrics.close()

    statuses = [r.status for r in results]
    if "preempted" in statuses:
        rd.save_checkpoint(checkpoint("preempted"))
        log.warning("preempted (%s) at step %d; checkpoint saved, relaunch to resume",
                    next(r.message for r in results if r.status == "preempted"), trainer.pos.step)
        _hand_back(trainer.stop_flag)
        return {"status": "preempted", "steps": trainer.pos.step, "ensemble_size": K}

    trainer.unstack()
    commit, elapsed = git_commit(), wall()
    summaries = []
    for i, (member, r) in enumerate(zip(trainer.members, results)):
        mcfg = member_config(cfg_dict, seeds[i])
        summary = run_summary(member, r, elapsed, spec, seeds[i], run_hash(mcfg), commit, data.name)
        if r.status == "finished":
            summary.update(runners[i].final(member.model))
        md = member_dirs[i]
        md.write_bytes(".hydra/config.yaml", OmegaConf.to_yaml(OmegaConf.create(mcfg)).encode())
        md.save_checkpoint(_checkpoint(trainer.member_state_dict(i), RunJob(spec, mcfg, md, summary["config_hash"]),
                                       r.status, elapsed, family))
        md.write_json(SUMMARY, summary)
        summaries.append(summary)

    objectives = [s["objective"] for s in summaries]
    ok = [i for i in range(K) if statuses[i] == "finished"] or list(range(K))
    best = min(ok, key=lambda i: objectives[i] if math.isfinite(objectives[i]) else math.inf)
    failed = [i for i in range(K) if statuses[i] == "failed"]
    top = {**summaries[best], "ensemble_size": K, "best_member": best, "member_objectives": objectives,
           "member_seeds": seeds, "member_status": statuses, "failed_members": failed, "config_hash": chash}
    if (member_dirs[best].path / "analysis").is_dir():  # the best member's arrays/tables, where a single run has them
        shutil.copytree(member_dirs[best].path / "analysis", rd.path / "analysis", dirs_exist_ok=True)
    if failed and top["status"] != "failed":
        log.warning("ensemble members %s failed (%s); the best member is %d (seed %d)", failed,
                    "; ".join(f"{i}: {results[i].message}" for i in failed), best, seeds[best])
    rd.save_checkpoint({**checkpoint(top["status"], best), "best_member": best})
    rd.write_json(SUMMARY, top)
    if tracker is not None:
        tracker.hparams(cfg_dict, top)
        tracker.close()
    if top["status"] == "failed":
        why = f"every ensemble member failed (member 0: {results[0].message})"
        rd.record_failure(why)
        raise RepcostError(f"run failed: {why}; summary and checkpoint in {rd.path} (a relaunch starts over)")
    rd.mark_finished(chash)
    return top
