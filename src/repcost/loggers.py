"""Optional experiment trackers beside metrics.jsonl: TensorBoard, MLflow and Weights & Biases (docs/trackers.md).

Each is an extra imported only by a run that chooses it (`logger=mlflow`, `logger=[tensorboard,mlflow]`). The
run path feeds `Trackers` every record it writes to metrics.jsonl, then the summary and figures (`finish`), or
None for a stopped run that a relaunch resumes (the tracker run ids are kept in RUN_DIR/trackers.json).
A tracker that fails is a warning in train.log and is dropped; the run goes on, its directory the record.
"""

from __future__ import annotations

import fcntl
import json
import logging
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .config.schema import TrackingConfig
from .identity import run_identity
from .provenance import git_commit, repcost_version
from .rundir import atomic_write_json, flat

IDS = "trackers.json"  # {tracker: its run id} of a run directory, so a resumed run continues the same tracker run

log = logging.getLogger("repcost")


def _scalars(d: dict) -> dict[str, float]:
    """The numbers of a (nested) dict but `step` (a metrics record's x axis), keys joined by '/' (the trackers'
    grouping)."""
    return {k: float(v) for k, v in flat(d, "/", sections=False).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step"}


def _hparam_values(config: dict) -> dict[str, Any]:
    """A run config flattened to dotted keys; trackers' hyper-parameters take only numbers, strings and bools, so
    lists (widths, phases) go as text."""
    return {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in flat(config, sections=False).items()
            if v is not None}


def _tags(run_dir: Path, chash: str) -> dict[str, str]:
    """What identifies a tracker run as a repcost run: identity hash, version, commit and run directory."""
    return {"repcost.config_hash": chash, "repcost.version": repcost_version(), "repcost.commit": git_commit(),
            "repcost.run_dir": str(run_dir.resolve())}


class TensorBoardTracker:
    """Writes a run's scalars and hyper-parameters as TensorBoard events under RUN_DIR/tensorboard/."""

    def __init__(self, run_dir: Path, cfg: dict, chash: str, run_id: str | None = None):
        # imported here: tensorboard is an optional extra
        from torch.utils.tensorboard import SummaryWriter

        self.cfg = cfg
        self._writer = SummaryWriter(log_dir=str(Path(run_dir) / "tensorboard"))

    def log(self, rec: dict) -> None:
        """Every number of one metrics record (`rec["step"]` is the x axis; nested dicts become groups)."""
        for key, value in _scalars(rec).items():
            self._writer.add_scalar(key, value, global_step=int(rec["step"]))

    def finish(self, summary: dict | None) -> None:
        """The run's config as hyper-parameters and its final numeric summary as their metrics; closes."""
        if summary is not None:
            metrics = {f"final/{k}": v for k, v in _scalars(summary).items()}
            # run_name="." keeps the hparams event in this run's directory instead of a timestamped subdir
            self._writer.add_hparams(_hparam_values(self.cfg), metrics, run_name=".")
        self._writer.close()


@contextmanager
def _local_store(uri: str) -> Iterator[str | None]:
    """For a local sqlite store: its folder made, an exclusive lock beside it held for the block, and the artifact
    location beside it (MLflow's own default is relative to the working directory); otherwise nothing, None."""
    if not uri.startswith("sqlite:///"):
        yield None
        return
    db = Path(uri.removeprefix("sqlite:///")).resolve()
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield (db.parent / "mlartifacts").as_uri()


class MLflowTracker:
    """One MLflow run per run directory, in the experiment named by the sweep (`name`), through MlflowClient."""

    def __init__(self, run_dir: Path, cfg: dict, chash: str, run_id: str | None = None):
        from mlflow import MlflowClient
        from mlflow.entities import Param

        uri = TrackingConfig(**cfg.get("tracking", {})).uri
        with _local_store(uri) as artifacts:  # sweep jobs in parallel processes create the store and experiment once
            self.client, self.run_dir = MlflowClient(tracking_uri=uri), run_dir
            self.logged = -1  # the last step the MLflow run has: a resumed run logs again from its checkpoint
            if run_id is not None:  # a resumed run continues its MLflow run
                self.client.update_run(run_id, status="RUNNING")
                self.logged = max((m.step for m in self.client.get_metric_history(run_id, "objective")), default=-1)
            else:
                name = str(cfg.get("name", "default"))
                exp = self.client.get_experiment_by_name(name)
                exp_id = exp.experiment_id if exp else self.client.create_experiment(name, artifacts)
                run_id = self.client.create_run(exp_id, run_name=run_dir.name, tags=_tags(run_dir, chash)).info.run_id
                params = [Param(k, str(v)) for k, v in _hparam_values(run_identity(cfg)).items()]
                for i in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
                    self.client.log_batch(run_id, params=params[i:i + 100])
        self.run_id = run_id

    def log(self, rec: dict) -> None:
        from mlflow.entities import Metric

        ms, step = int(time.time() * 1000), int(rec["step"])
        if step <= self.logged:  # logged before a hard kill, after the checkpoint this run resumed from
            return
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, ms, step) for k, v in _scalars(rec).items()])

    def finish(self, summary: dict | None) -> None:
        if summary is None:  # a stopped run stays RUNNING in MLflow: its relaunch continues it
            return
        self.client.log_artifact(self.run_id, str(self.run_dir / "summary.json"))
        if (self.run_dir / "figures").is_dir():
            self.client.log_artifacts(self.run_id, str(self.run_dir / "figures"), "figures")
        self.client.set_terminated(self.run_id, "FAILED" if summary.get("status") == "failed" else "FINISHED")


class WandbTracker:
    """One W&B run per run directory (files under RUN_DIR/wandb/): project `tracking.project`, the sweep's
    `name` as its group, offline unless `tracking.mode=online` (`wandb sync` uploads offline runs later)."""

    def __init__(self, run_dir: Path, cfg: dict, chash: str, run_id: str | None = None):
        import wandb

        tracking, self.run_dir = TrackingConfig(**cfg.get("tracking", {})), run_dir
        settings = wandb.Settings(mode=tracking.mode, silent=True, console="off", x_disable_stats=True, save_code=False)
        self.run = wandb.init(dir=str(run_dir), project=tracking.project,
                              group=str(cfg.get("name", "default")), name=run_dir.name, id=run_id,
                              resume="allow" if run_id else None, config={**run_identity(cfg), "repcost": _tags(run_dir, chash)},
                              tags=[chash], settings=settings, reinit="create_new")
        self.run_id = self.run.id

    def log(self, rec: dict) -> None:
        self.run.log(_scalars(rec), step=int(rec["step"]))

    def finish(self, summary: dict | None) -> None:
        if summary is not None:
            self.run.summary.update(_scalars(summary))
            for f in [self.run_dir / "summary.json", *sorted((self.run_dir / "figures").glob("*"))]:
                self.run.save(str(f), base_path=str(self.run_dir), policy="now")
        # exit code 1: a failed run, or a stopped one (its relaunch resumes it under the same id)
        self.run.finish(exit_code=1 if summary is None or summary.get("status") == "failed" else 0)


# A tracker is built as KIND(run_dir, cfg, config hash, run id to resume or None) and has `run_id` (where it has
# a run to resume), `log(record)` and `finish(summary)`: a finished or failed run's (summary.json and figures/ are
# written by then), or None for a stopped (preempted) run, which its relaunch continues.
KINDS: dict[str, type] = {"tensorboard": TensorBoardTracker, "mlflow": MLflowTracker, "wandb": WandbTracker}


class Trackers:
    """The trackers a run chose (`logger`), fed together (`call`); one that raises is a warning and is dropped."""

    def __init__(self, names: tuple[str, ...], run_dir: Path, cfg: dict, chash: str, resume: bool):
        ids_file, ids = Path(run_dir) / IDS, {}
        self.live: dict[str, Any] = {}
        if resume and ids_file.exists():
            self._call(IDS, lambda: ids.update(json.loads(ids_file.read_text())))
        for name in names:
            self._call(name, lambda: self.live.__setitem__(name, KINDS[name](Path(run_dir), cfg, chash, ids.get(name))))
        ids.update({n: t.run_id for n, t in self.live.items() if getattr(t, "run_id", None) is not None})
        if ids:
            self._call(IDS, lambda: atomic_write_json(ids_file, ids))

    def _call(self, name: str, fn) -> None:
        try:
            fn()
        except Exception as e:  # a tracker never stops a run: server gone, disk full, a broken URI
            log.warning("logger %s failed and is off for the rest of this run (%s: %s); metrics.jsonl is complete",
                        name, type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            self.live.pop(name, None)

    def call(self, method: str, *args: Any) -> None:
        """Every tracker's `log(record)` or `finish(summary or None)` (`KINDS`)."""
        for name, t in list(self.live.items()):
            self._call(name, lambda: getattr(t, method)(*args))


def read_wandb_offline(path: Path | str) -> dict[str, Any]:
    """An offline W&B run read back from its `.wandb` file, without network: {"run": project, group, id and
    tags, "config", "history": one dict per logged step, "summary", "files"}, as wandb stored them."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    out: dict[str, Any] = {"run": {}, "config": {}, "history": [], "summary": {}, "files": []}
    i, buf = 7, b""  # past the file header: LevelDB-log records (header: crc, length, kind) in 32 KiB blocks
    while i + 7 <= len(data):
        if 32768 - i % 32768 < 7:  # a block's tail too short for a record header is padding
            i += 32768 - i % 32768
            continue
        n, kind = struct.unpack("<HB", data[i + 4:i + 7])
        buf, i = buf + data[i + 7:i + 7 + n], i + 7 + n
        if kind == 0:  # zeros: the end of what was written
            break
        if kind not in (1, 4):  # the first or a middle part of a record split across blocks
            continue
        r, buf = pb.Record.FromString(buf), b""
        what = r.WhichOneof("record_type")
        if what == "run":
            out["run"] = {"project": r.run.project, "group": r.run.run_group, "id": r.run.run_id,
                          "name": r.run.display_name, "tags": list(r.run.tags)}
            out["config"].update(_items(r.run.config.update))
        elif what == "config":
            out["config"].update(_items(r.config.update))
        elif what == "history":
            out["history"].append(_items(r.history.item))
        elif what == "summary":
            out["summary"].update(_items(r.summary.update))
        elif what == "files":
            out["files"] += [f.path for f in r.files.files]
    return out


def _items(items) -> dict[str, Any]:
    """W&B's (key or nested key, JSON value) items as a dict."""
    return {x.key or "/".join(x.nested_key): json.loads(x.value_json) for x in items}
