"""One run end to end: data, model(s), training, outputs (docs/ARCHITECTURE.md, "The path of one run").

`run_training` serves a single run (K = 1) and an ensemble of K stacked members alike; both go
through the same run-directory protocol (`repcost.rundir.RunDir`): lock, decide (skip a
finished run, resume a checkpoint, move aside what is in the way), train, write.

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
from collections.abc import Callable
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
    cert = critical_point_certificate(model, member.data.x_train, member.y_train, cfg.loss, cfg.lam, cfg.reg_scale)
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



def run_training(spec: RunSpec, cfg_dict: dict, run_dir: Path, stop_flag: StopFlag | None = None,
                 chash: str | None = None, force: bool = False, on_stale: str = "refuse",
                 before_start: Callable[[RunDir], None] | None = None) -> dict:
    """Train the run described by `spec` in `run_dir`; returns its summary.

    A finished run of the same identity is not retrained (its summary is returned, with
    `"reused": True`); a preempted one resumes from its checkpoint. `before_start(run_dir)` runs
    once the directory is ready and before training (the CLI writes `.hydra/` there).
    """
    rd = RunDir(run_dir)
    chash = chash or run_hash(cfg_dict)
    with rd.locked():
        what, resume = open_run(rd, chash, force=force, on_stale=on_stale)
        if what == "finished":
            return {**rd.summary(), "reused": True}
        if before_start is not None:
            before_start(rd)
        return _train(spec, cfg_dict, rd, chash, resume, stop_flag)


def _train(spec: RunSpec, cfg_dict: dict, rd: RunDir, chash: str, resume: dict | None,
           stop_flag: StopFlag | None) -> dict:
    from ..analysis.hooks import (
        AnalysisRunner,  # analysis builds on models; import lazily
    )
    from .ensemble import EnsembleTrainer
    from .loop import Trainer

    t_start = time.perf_counter()
    device, dtype = torch.device(spec.device), spec.torch_dtype
    K = spec.train.ensemble_size
    seeds = [spec.seed + i for i in range(K)]
    data = load_data(spec.data)
    if spec.train.loss == "cross_entropy" and data.task != "classification":
        raise RepcostError(f"train.loss=cross_entropy needs a classification dataset; data={data.name} is regression")
    models = [build_model(spec.model, data.d_in, data.d_out, s).to(device=device, dtype=dtype) for s in seeds]
    data = data.to(dtype, device)
    family = models[0].family
    member_dirs = [rd] if K == 1 else [RunDir(rd.path / MEMBERS / str(i)) for i in range(K)]
    runners = [AnalysisRunner(spec.analysis, m, data, d.path) for m, d in zip(models, member_dirs)]
    resume_key = "trainer" if K == 1 else "ensemble"
    metrics = rd.metrics(keep_before=resume[resume_key]["position"]["step"] if resume else 0)
    tracker = None
    if spec.logger == "tensorboard":  # optional: the metrics records also go to TensorBoard
        from ..loggers import TensorBoardLogger

        tracker = TensorBoardLogger(rd.path)
        metrics = _Tee(metrics, tracker.log)
    hooks = [r.periodic if r.enabled_periodic else None for r in runners]
    fast = fast_step_options(spec.train, device, K, data.x_train.shape[0], models[0])
    if K == 1:
        trainer = Trainer(models[0], data, spec.train, seeds[0], on_log=metrics, hook=hooks[0],
                          hook_every=spec.analysis.every, stop_flag=stop_flag, **fast)
    else:
        trainer = EnsembleTrainer(models, data, spec.train, seeds, on_log=metrics, hooks=hooks,
                                  hook_every=spec.analysis.every, stop_flag=stop_flag, **fast)
    wall_before = float(resume.get("wall_time_s", 0.0)) if resume is not None else 0.0

    def wall() -> float:
        return wall_before + time.perf_counter() - t_start

    def checkpoint(status: str, best: int = 0) -> dict:
        ck = {"trainer": trainer.member_state_dict(best), "config_hash": chash, "status": status,
              "family": family, "config": cfg_dict, "wall_time_s": wall()}
        if K > 1:
            ck["ensemble"] = trainer.state_dict()
        return ck

    trainer.engine.on_checkpoint = lambda: rd.save_checkpoint(checkpoint("running"))
    if resume is not None:
        trainer.load_state_dict(resume[resume_key])
        log.info("resuming %s from step %d (%.0f s trained before)", rd.path, trainer.pos.step, wall_before)
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
        hand_back = getattr(trainer.stop_flag, "hand_back", None)
        if hand_back is not None:
            hand_back()  # a launcher's own handler (submitit: requeue and exit) now that the checkpoint is safe
        out = {"status": "preempted", "steps": trainer.pos.step}
        return out if K == 1 else {**out, "ensemble_size": K}

    if K > 1:
        trainer.unstack()
    commit, elapsed = git_commit(), wall()
    summaries = []
    for i, (member, r) in enumerate(zip(trainer.members, results)):
        mcfg = cfg_dict if K == 1 else member_config(cfg_dict, seeds[i])
        summary = run_summary(member, r, elapsed, spec, seeds[i], chash if K == 1 else run_hash(mcfg), commit,
                              data.name)
        if r.status == "finished":
            summary.update(runners[i].final(member.model))
        if K > 1:
            md = member_dirs[i]
            md.write_bytes(".hydra/config.yaml", OmegaConf.to_yaml(OmegaConf.create(mcfg)).encode())
            md.save_checkpoint({"trainer": trainer.member_state_dict(i), "config_hash": summary["config_hash"],
                                "status": r.status, "family": family, "config": mcfg, "wall_time_s": elapsed})
            md.write_json(SUMMARY, summary)
        summaries.append(summary)

    if K == 1:
        best, top = 0, summaries[0]
    else:
        objectives = [s["objective"] for s in summaries]
        ok = [i for i in range(K) if statuses[i] == "finished"] or list(range(K))
        best = min(ok, key=lambda i: objectives[i] if math.isfinite(objectives[i]) else math.inf)
        failed = [i for i in range(K) if statuses[i] == "failed"]
        top = {**summaries[best], "ensemble_size": K, "best_member": best, "member_objectives": objectives,
               "member_seeds": seeds, "member_status": statuses, "failed_members": failed,
               "config_hash": chash}
        if (member_dirs[best].path / "analysis").is_dir():  # the best member's arrays/tables, where a single run has them
            shutil.copytree(member_dirs[best].path / "analysis", rd.path / "analysis", dirs_exist_ok=True)
        if failed and top["status"] != "failed":
            log.warning("ensemble members %s failed (%s); the best member is %d (seed %d)", failed,
                        "; ".join(f"{i}: {results[i].message}" for i in failed), best, seeds[best])
    ck = checkpoint(top["status"], best)
    if K > 1:
        ck["best_member"] = best
    rd.save_checkpoint(ck)
    if K == 1 and top["status"] == "finished" and data.task == "regression" and data.d_in == 1 and data.d_out == 1:
        _plot_fit_1d(models[0], data, rd.path / "figures" / "fit.png", top)
    rd.write_json(SUMMARY, top)
    if tracker is not None:
        tracker.hparams(cfg_dict, top)
        tracker.close()
    if top["status"] == "failed":
        why = results[best].message if K == 1 else f"every ensemble member failed (member 0: {results[0].message})"
        rd.record_failure(why)
        raise RepcostError(f"run failed: {why}; summary and checkpoint in {rd.path} (a relaunch starts over)")
    rd.mark_finished(chash)
    return top

