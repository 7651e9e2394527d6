"""The one run path: run directories opened, trained in one engine, written.

docs/ARCHITECTURE.md, "The path of one run", follows it step by step.

`train_runs` opens run directories (`open_run`: reuse a finished run, resume a checkpoint, move aside what is
in the way) and trains the runs left, in one engine per starting position (`train_group`, stacked when
several); each directory gets exactly its single run's files. `train.ensemble_size = K` is K member runs
plus one aggregation step (`ensemble.py`). `train_run` is one run, for library callers.
"""

from __future__ import annotations

import io
import logging
import signal
import time
from collections.abc import Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import torch
from omegaconf import DictConfig

from ..analysis.hooks import AnalysisRunner
from ..config.schema import RunSpec
from ..config.limits import allocating
from ..data import load_data
from ..errors import RepcostError
from ..identity import check_stackable, identity_changes, run_hash
from ..loggers import Trackers
from ..models import build_model
from ..rundir import CHECKPOINT, ERROR, MEMBERS, METRICS, SUMMARY, RunDir, metrics_sink, remove_dead_temp_files
from ..provenance import provenance
from .. import startup, threads
from . import certify
from .engine import Engine
from .ensemble import aggregate
from .preempt import StopFlag, stop_on_signals
from .step import fast_step_options

log = logging.getLogger("repcost")


# -- deciding what to do with a run directory ----------------------------------------------------
def _has_identity(ck: dict, chash: str) -> bool:
    """Whether a checkpoint is of the run with identity `chash`: by its stored hash, or, for runs whose stored
    hash follows other identity rules, by the config saved with it."""
    if ck.get("config_hash") == chash:
        return True
    cfg = ck.get("config")
    try:
        return isinstance(cfg, dict) and run_hash(cfg) == chash
    except RepcostError:  # a config of a family or dataset that no longer exists
        return False


def open_run(rd: RunDir, chash: str, force: bool = False, on_stale: str = "refuse",
             ensemble: bool = False, cfg: dict | None = None) -> tuple[str, dict | None]:
    """What to do in `rd` for a config of identity `chash`: ("finished", None), ("resume", ckpt) or ("fresh", None).

    Never deletes: a run in the way is moved aside (`RunDir.move_aside`). A finished run of another
    config is refused (RepcostError) unless `force` or `on_stale="move"` (sweep jobs, whose
    directories are named by their overrides, so an edited preset lands on its old jobs). An
    `ensemble` keeps its state in its members' directories: those decide for themselves.
    """
    remove_dead_temp_files(rd.path)
    fh = rd.finished_hash()
    if force:
        why = "force=true"
    elif fh is not None:  # FINISHED may hold a hash of other identity rules: the checkpoint's config decides then
        if fh == chash:
            return "finished", None
        ck, version = {}, None
        with suppress(RepcostError):  # an unreadable checkpoint: not this run's
            ck = rd.load_checkpoint()
            if _has_identity(ck, chash):
                return "finished", None
            version = rd.summary().get("repcost_version")
        old = ck.get("config")  # what differs between it and this config (`identity.identity_changes`):
        changed = identity_changes(old, cfg, version) if isinstance(old, dict) and cfg is not None else "config unknown"
        if on_stale != "move":
            raise RepcostError(f"{rd.path} holds a finished run of another config ({changed}; hash {fh}, this config "
                               f"{chash}); finished results are never overwritten: use another directory, or force=true "
                               "to move the old run aside")
        why = f"finished run of another config ({changed}; hash {fh}; replaced by {chash})"
    elif rd.file(ERROR).exists():
        why = "a failed attempt"
    elif rd.file(CHECKPOINT).exists():
        ck = rd.load_checkpoint()  # an unreadable checkpoint is a one-line error naming it
        same = _has_identity(ck, chash)
        if same and ck.get("status") in ("running", "preempted") and not ensemble:
            return "resume", ck
        why = (f"unfinished run of another config (hash {ck.get('config_hash')})" if not same
               else f"a {ck.get('status')} attempt" + (" in an older ensemble format" if "ensemble" in ck else ""))
    else:  # an unfinished ensemble's members decide for themselves
        why = None if ensemble and not rd.file(SUMMARY).exists() else "leftovers without a checkpoint"
    if why is not None and rd.has_results():
        log.warning("the run in %s was moved to %s (%s); starting over", rd.path, rd.move_aside(why), why)
    return "fresh", None


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
        """(phase, step in phase, step) where training starts: runs stacked in one engine must share it."""
        if self.resume is None:
            return (0, 0, 0)
        p = self.resume["trainer"]["position"]
        return (p["phase"], p["step_in_phase"], p["step"])

    def checkpoint(self, engine: Engine, i: int, status: str, wall: float) -> dict:
        """checkpoint.pt: the engine's state of this run (its member i) plus what identifies and resumes it."""
        return {"trainer": engine.state_dict(i), "config_hash": self.chash, "status": status,
                "family": engine.members[i].model.family, "config": self.cfg_dict, "wall_time_s": wall}

    def preempted(self, steps: int, sig: int | None) -> dict:
        """What this run returns when a stop signal ended it at `steps` (its checkpoint written)."""
        return {"status": "preempted", "steps": steps, "total_steps": self.spec.train.total_steps, "signal": sig}


# -- opening and training run directories --------------------------------------------------------
def train_run(spec: RunSpec, cfg_dict: dict, run_dir: Path, stop_flag: StopFlag | None = None,
              on_stale: str = "refuse") -> dict:
    """Train the run described by `spec` in `run_dir` (`train_runs` of one); returns its summary, or raises what
    it ends with. A finished run of the same identity is not retrained (its summary, with `"reused": True`); a
    preempted one resumes from its checkpoint."""
    out = train_runs([spec], [cfg_dict], [run_dir], stop_flag, on_stale=on_stale)[0]
    if isinstance(out, Exception):
        raise out
    return out


def train_runs(specs: Sequence[RunSpec], cfg_dicts: Sequence[dict], run_dirs: Sequence[Path],
               stop_flag: StopFlag | None = None, force: bool = False, on_stale: str = "refuse",
               hydra_cfgs: Sequence[DictConfig | None] | None = None) -> list[dict | Exception]:
    """Open run directories and train their runs in one process: the one path of every training.

    Runs that start at one position train in one engine (`train_group`, stacked when several), so several runs
    must differ only in `identity.STACKABLE_KEYS` (else RepcostError at once); a single run may be an ensemble
    (`_train_ensemble`). Returns, per run, its summary (`"reused": True` for a finished one),
    `{"status": "preempted", ...}`, or the exception the run ends with (a failed run, a directory refused by
    `open_run` or locked by another process): one run's failure never stops the others. Each directory stays
    locked until all are written; its `.hydra/` is written once `open_run` made it the run's (`hydra_cfgs[i]`:
    the Hydra job's config, for hydra.yaml and overrides.yaml).
    """
    n = len(specs)
    check_stackable(cfg_dicts)
    ensemble = specs[0].train.ensemble_size > 1  # then every run's (`check_stackable`: one ensemble_size)
    for sp in specs[1:]:  # one device for the process (a sweep job's placement is the first job's)
        sp.device = specs[0].device
    flag = stop_flag if stop_flag is not None else StopFlag()
    out: list[dict | Exception | None] = [None] * n
    with ExitStack() as held:
        jobs: dict[int, RunJob] = {}
        for i in range(n):
            # resolved: one directory given twice is one lock, which refuses the second run
            rd, chash = RunDir(Path(run_dirs[i]).resolve()), run_hash(cfg_dicts[i])
            try:
                held.enter_context(rd.locked())
                what, resume = open_run(rd, chash, force, on_stale, ensemble, cfg_dicts[i])
                if what == "finished":
                    out[i] = {**rd.summary(), "reused": True}
                else:
                    rd.write_config(cfg_dicts[i], hydra_cfgs[i] if hydra_cfgs else None)
                    jobs[i] = RunJob(specs[i], cfg_dicts[i], rd, chash, resume)
            except RepcostError as e:
                out[i] = e
        startup.training_begins()  # the directories are relaunchable runs: the training's signal handling rules
        for start in dict.fromkeys(job.start for job in jobs.values()):  # one engine per starting position
            idx = [i for i, job in jobs.items() if job.start == start]
            try:
                if flag.signal is not None:  # preempted in an earlier group: left for the relaunch
                    results = [jobs[i].preempted(start[2], flag.signal) for i in idx]
                else:
                    results = ([_train_ensemble(jobs[i], flag) for i in idx] if ensemble
                               else train_group([jobs[i] for i in idx], flag))
            except Exception as e:  # a problem of the whole group (e.g. its data, a full disk): each run's outcome
                for i in idx:
                    jobs[i].rd.settle_failure(failure_message(e))
                results = [e] * len(idx)
            for i, r in zip(idx, results):
                out[i] = r
    return out  # type: ignore[return-value]


def _train_ensemble(job: RunJob, stop_flag: StopFlag) -> dict:
    """K member runs (members/<i>/, seeds seed … seed+K−1, each its single run) trained as one stacked group,
    then the best-of-K summary at the top (`ensemble.aggregate`)."""
    seeds = [job.spec.seed + i for i in range(job.spec.train.ensemble_size)]
    specs = [replace(job.spec, seed=s, train=replace(job.spec.train, ensemble_size=1)) for s in seeds]
    cfgs = [{**job.cfg_dict, "seed": s, "train": {**job.cfg_dict.get("train", {}), "ensemble_size": 1}} for s in seeds]
    results = train_runs(specs, cfgs,
                         [job.rd.path / MEMBERS / str(i) for i in range(len(seeds))], stop_flag, on_stale="move")
    return aggregate(job.rd, job.cfg_dict, job.chash, seeds, results)


def failure_message(e: BaseException) -> str:
    """A failure's one line as error.txt keeps it (a bug's with its exception class)."""
    return f"{e}" if isinstance(e, RepcostError) else f"{e.__class__.__name__}: {e}"


def train_group(jobs: Sequence[RunJob], stop_flag: StopFlag | None = None) -> list[dict | Exception]:
    """Train opened runs that start at one position in one engine (K = len(jobs), stacked when K > 1).

    Each run's directory gets exactly its single run's files (`_complete`); a preempted run gets a
    checkpoint with status `preempted`. Returns per run its summary, `{"status": "preempted", ...}`, or the
    RepcostError its single run raises (a failed run: error.txt is written).
    """
    t_start = time.perf_counter()
    spec, K = jobs[0].spec, len(jobs)
    device, dtype = torch.device(spec.device), spec.torch_dtype
    with allocating(spec, "the data"):
        data = load_data(spec.data)
    if spec.train.loss == "cross_entropy" and data.task != "classification":
        raise RepcostError(f"train.loss=cross_entropy needs a classification dataset; data={data.name} is regression")
    with allocating(spec, "the models and their activations"):
        models = [build_model(j.spec.model, data.d_in, data.d_out, j.spec.seed, data.x_train).to(device=device, dtype=dtype)
                  for j in jobs]
        data = data.to(dtype, device)
        rows = max(p.batch_size or data.x_train.shape[0] for p in spec.train.phases)
        with torch.no_grad():  # the activations of the largest batch, before any training (compiling takes minutes)
            models[0](data.x_train[:rows])
    n_params = sum(p.numel() for p in models[0].parameters())
    threads.fit_to_model(data.x_train.shape[0], K * n_params)
    runners = [AnalysisRunner(j.spec.analysis, m, data, j.rd.path, j.spec.train) for m, j in zip(models, jobs)]
    sinks = [metrics_sink(j.rd.file(METRICS), keep_before=j.start[2]) for j in jobs]
    trackers = [Trackers(j.spec.logger, j.rd.path, j.cfg_dict, j.chash, resume=j.resume is not None) for j in jobs]

    def record(i: int, rec: dict) -> None:  # every record goes to metrics.jsonl and the run's trackers (repcost.loggers)
        sinks[i](rec)
        trackers[i].call("log", rec)

    engine = Engine(models, data, [j.spec.train for j in jobs], [j.spec.seed for j in jobs],
                    on_logs=[partial(record, i) for i in range(K)], hooks=[r.periodic for r in runners],
                    hook_every=spec.analysis.every, stop_flag=stop_flag,
                    **fast_step_options(spec.train, device, K, data.x_train.shape[0], n_params))
    for i, j in enumerate(jobs):  # each from its own checkpoint, at the common position
        if j.resume is not None:
            engine.load_state_dict(i, j.resume["trainer"])
            log.info("resuming %s from step %d (%.0f s trained before)", j.rd.path, j.start[2], j.wall_before)

    def checkpoint_running() -> None:  # runs still training; a stopped one is written when the process ends
        for i in engine.active:
            wall = jobs[i].wall_before + time.perf_counter() - t_start
            jobs[i].rd.save_checkpoint(jobs[i].checkpoint(engine, i, "running", wall))

    engine.on_checkpoint = checkpoint_running
    # a stop signal once training has ended waits for the runs' files (the run finishes, nothing is lost)
    with stop_on_signals(engine.stop_flag):
        try:
            with allocating(spec, "the training's tensors"):
                results = engine.run()
        except Exception as e:
            if not engine.stop_flag:
                raise
            # SLURM and Ctrl-C signal the job's child processes too: a compiler killed by the stop signal fails
            # the compile. The runs stop as preempted, at their last checkpoint.
            log.warning("stopped by signal %s (%s: %.200s); relaunch to resume from the last checkpoint",
                        engine.stop_flag.signal, type(e).__name__, str(e).strip().split("\n")[0])
            results = None
        sig = engine.stop_flag.signal
        out: list[dict | Exception] = [j.preempted(j.start[2], sig) for j in jobs]  # at their last checkpoint
        elapsed = time.perf_counter() - t_start  # the training time of every run of this process
        for i, (j, r) in enumerate(zip(jobs, results or ())):
            wall = j.wall_before + elapsed
            if r.status == "preempted":
                j.rd.save_checkpoint(j.checkpoint(engine, i, "preempted", wall))
                trackers[i].call("finish", None)
                out[i] = j.preempted(r.steps, sig)
            else:
                out[i] = _complete(j, engine, i, runners[i], trackers[i], wall)
    if results is None or any(r.status == "preempted" for r in results):
        if results is not None and sig != signal.SIGINT:  # Ctrl-C: the caller says it in its own words
            log.warning("preempted (signal %s) at step %d; checkpoint saved, relaunch to resume", sig, engine.pos.step)
        engine.stop_flag.hand_back()  # a launcher's own handler (submitit: requeue and exit): the checkpoints are safe
    return out


def _complete(job: RunJob, engine: Engine, i: int, runner: AnalysisRunner, tracker: Trackers,
              wall: float) -> dict | RepcostError:
    """A run's final files: summary.json (final objective terms, cost, stop reason, provenance, the certificate and
    final analyses), checkpoint.pt, FINISHED, then figures/fit.png; or error.txt for a failed run (returned as the
    RepcostError it raises)."""
    m, spec = engine.members[i], job.spec
    model, result, data, ev = m.model, m.result, m.data, m.evaluate()
    cost = float(model.cost().detach())
    summary = {
        **ev,
        "param_sq_norm_per_depth": ev["param_sq_norm"] / model.depth,
        "cost": cost,
        "depth": model.depth,
        "steps": engine.position(i).step,
        "stop_reason": result.stop_reason,
        "status": result.status,
        **certify.summary_fields(spec.train, result.stop_reason, m.gap, spec.train.round_of(engine.last_phase(i)),
                                 engine.position(i).step, cost, data.x_train, m.y_train),
        "message": result.message,
        "wall_time_s": wall,
        "device": str(torch.device(spec.device)),
        "dtype": spec.dtype,
        "seed": m.seed,
        **provenance(),
        "config_hash": job.chash,
        "model": model.family,
        "data": data.name,
    }
    if result.status == "finished":
        summary.update(runner.final(model))
    checkpoint = job.checkpoint(engine, i, result.status, wall)
    if result.status == "failed":
        out: dict | RepcostError = job.rd.fail(checkpoint, summary, result.message)
    else:
        job.rd.finish(checkpoint, summary, job.chash)  # checkpoint, summary, FINISHED: never one without the others
        out = summary
        if data.task == "regression" and data.d_in == 1 and data.d_out == 1:  # after FINISHED: a figure that cannot be written costs the figure, not the run
            _plot_fit(model, data, job.rd, summary)
    tracker.call("finish", summary)  # after summary.json, which the trackers keep as an artifact
    return out


def _plot_fit(model, data, rd: RunDir, summary: dict) -> None:
    """figures/fit.png: the learned 1-D function over the data range (and a margin), the points and the
    min-norm linear spline through them. A file that cannot be written is a warning (train.log and the console)."""
    from ..analysis.relu_1d import linear_spline_interpolant
    from ..plots.learned_function import function_panels  # matplotlib: only once the run is finished

    x, y = (t[:, 0].detach().cpu().double().numpy() for t in (data.x_train, data.y_train))
    lo, hi = float(x.min()), float(x.max())
    pad = 0.25 * (hi - lo or 1.0)
    grid = torch.linspace(lo - pad, hi + pad, 600, dtype=data.x_train.dtype, device=data.x_train.device)
    with torch.no_grad():
        f = model(grid[:, None])[:, 0].cpu().double().numpy()
    g = grid.cpu().double().numpy()
    title = f"{model.family} L={model.depth}: train loss {summary['train_loss']:.3g}, cost {summary['cost']:.4g}"
    png = io.BytesIO()
    function_panels(x, y, g, [f], [title], linear_spline_interpolant(x, y)(g)).savefig(png, format="png", dpi=110)
    try:
        rd.write_bytes("figures/fit.png", png.getvalue())  # atomic: never a partly written figure
    except RepcostError as e:
        log.warning("warning: %s; the run is finished, only this figure is missing", e)
