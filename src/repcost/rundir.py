"""Run directories on disk (docs/ARCHITECTURE.md, "Run directories"): their I/O, and one object for runs and members.

A run directory holds `checkpoint.pt`, `metrics.jsonl`, `summary.json`, `FINISHED` (the run's
identity hash, written last), `error.txt` (a failed run) and `.hydra/`. Rules:
* every file is written atomically (temp file in the same folder, then rename) with the
  permissions the umask gives (0644 under the usual 022), so a lab group can read results;
* a finished run is never overwritten and nothing is ever deleted: a run in the way (another
  config, a failed attempt, or `force=true`) is moved aside to `<dir>.stale-<time>`;
* one process at a time: an OS file lock (`.lock`) is held for the run's life; a second process
  gets a one-line error naming the holder, a lock left by a killed process is free again;
* temp files left by a write that was killed are removed before a run resumes (`remove_dead_temp_files`);
* no run inside a sweep root and no sweep inside a run (`check_place`, before Hydra creates either): a single run
  planted in a sweep root would become a bogus job of it (`repcost-collect` lists every run below the root), and a
  sweep inside a run would mix its jobs with the run's files.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import re
import shutil
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from .errors import ConfigError, RepcostError, io_error, one_line
from .renamed import summary_keys

CHECKPOINT, SUMMARY, METRICS, FINISHED, ERROR, LOCK = (
    "checkpoint.pt", "summary.json", "metrics.jsonl", "FINISHED", "error.txt", ".lock")
MEMBERS = "members"


def jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (torch.Tensor, np.ndarray, np.generic)):  # (a numpy scalar's tolist is its Python value)
        return jsonable(x.tolist())
    if isinstance(x, float) and not np.isfinite(x):
        return str(x)  # JSON has no NaN/inf
    return x


def flat(node: Any, sep: str = ".", sections: bool = True, prefix: str = "") -> dict[str, Any]:
    """A nested dict as {joined key: value}; a list of sections (dicts) by index (train.phases.0.lr), or as one
    value where not `sections`."""
    if isinstance(node, dict) or (sections and isinstance(node, list) and node
                                  and all(isinstance(v, dict) for v in node)):
        items = node.items() if isinstance(node, dict) else enumerate(node)
        return {k: v for key, value in items for k, v in flat(value, sep, sections, f"{prefix}{key}{sep}").items()}
    return {prefix[:-len(sep)]: node}


FILE_MODE = 0o666  # os.open applies the umask: 0644 under the usual 022, so a lab group can read results


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Around writes to `path`: an OSError (disk full, read-only, size limit, …) is `errors.io_error`'s one line."""
    try:
        yield
    except OSError as e:
        raise io_error(path, e) from None


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temp file in the same folder and a rename; OSError -> one line."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def append_line(path: Path, line: str) -> None:
    """Append `line` and a newline to `path` in one write (O_APPEND): lines of parallel processes never mix.
    OSError -> one line."""
    with writing(path):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def remove_dead_temp_files(folder: Path) -> None:
    """Temp files `.<name>.<pid>.tmp` (`atomic_write_bytes`) of writes that were killed: their process is gone. A
    live writer's (e.g. a collect running beside this one) is left alone."""
    for f in Path(folder).glob(".*.*.tmp"):
        pid = f.name.split(".")[-2]
        try:
            if pid.isdigit():
                os.kill(int(pid), 0)
        except ProcessLookupError:
            f.unlink(missing_ok=True)
        except OSError:  # the process exists (owned by another user)
            pass


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write `obj` as indented JSON atomically (tensors/arrays become lists, NaN a string)."""
    atomic_write_bytes(path, (json.dumps(jsonable(obj), indent=2, sort_keys=True) + "\n").encode())


def csv_bytes(rows: list[dict]) -> bytes:
    """Rows of dicts as CSV bytes, columns in first-seen order (missing cells empty)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(c for r in rows for c in r)))
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode()


def load_checkpoint(path: Path) -> dict:
    """Load a checkpoint written by repcost (weights_only=True: plain tensors and containers, never code)."""
    try:
        with warnings.catch_warnings():  # the unpickler's notes on a foreign pickle: its refusal below is the one line
            warnings.simplefilter("ignore")
            ck = torch.load(path, map_location="cpu", weights_only=True)
        why = None if isinstance(ck, dict) and "trainer" in ck and "config_hash" in ck else "not a repcost checkpoint"
    except Exception as e:  # truncated, random, foreign or malicious (pickled code is refused)
        why = f"{e.__class__.__name__}: {(str(e).strip().splitlines() or [''])[0][:160]}"
    if why is not None:
        raise RepcostError(f"cannot read checkpoint {path}: {why}; force=true moves the run aside and starts over")
    return ck


def read_summary(path: Path) -> dict:
    """summary.json as a dict, old key names mapped (`renamed.summary_keys`); RepcostError naming it if unreadable."""
    try:
        summary = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:  # ValueError: bad JSON or bad UTF-8 (a truncated or overwritten file)
        raise RepcostError(f"{path}: not readable as JSON ({one_line(e)})") from None
    if not isinstance(summary, dict):
        raise RepcostError(f"{path}: not a JSON object (holds a {type(summary).__name__})")
    return summary_keys(summary)


def read_metrics(path: Path) -> list[dict]:
    """metrics.jsonl's records, one dict per logged step; RepcostError naming the line that is not one."""
    out = []
    for i, line in enumerate(Path(path).read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise RepcostError(f"{path} line {i}: not a JSON record ({e.__class__.__name__}: {e})") from None
        if not isinstance(rec, dict) or "step" not in rec:
            raise RepcostError(f"{path} line {i}: not a metrics record (no step)")
        out.append(rec)
    return out


def _torch_bytes(obj: Any) -> bytes:
    """torch.save into memory: a full disk then fails the write of the bytes and leaves the old file."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def metrics_sink(path: Path, keep_before: int = 0) -> Callable[[dict], None]:
    """What writes metrics.jsonl: one JSON line appended per logged step (`append_line`).

    Resuming at step `keep_before` keeps the lines of earlier steps (the later ones are logged again). A fresh
    start finds no earlier file: `open_run` moves an earlier attempt aside whole, its metrics with it.
    """
    def line(rec: dict) -> str:
        return json.dumps(jsonable(rec), sort_keys=True)

    keep = read_metrics(path) if path.exists() else []  # resuming: lines of later steps are dropped
    atomic_write_bytes(path, "".join(line(r) + "\n" for r in keep if r["step"] < keep_before).encode())
    return lambda rec: append_line(path, line(rec))


class RunDir:
    """One run's directory (a single run, an ensemble, or one ensemble member)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def file(self, name: str) -> Path:
        return self.path / name

    # -- state ---------------------------------------------------------------------------------
    def finished_hash(self) -> str | None:
        """The identity hash in FINISHED, or None if the run is not finished."""
        f = self.file(FINISHED)
        return f.read_text().strip() if f.exists() else None

    def has_results(self) -> bool:
        """Whether anything a run leaves (checkpoint, summary, metrics, markers, members) is here."""
        return any(self.file(n).exists() for n in (CHECKPOINT, SUMMARY, METRICS, FINISHED, ERROR, MEMBERS))

    def summary(self) -> dict:
        return read_summary(self.file(SUMMARY))

    # -- writes --------------------------------------------------------------------------------
    def write_bytes(self, name: str, data: bytes) -> None:
        atomic_write_bytes(self.file(name), data)

    def write_config(self, config: dict | DictConfig, hydra_cfg: DictConfig | None = None) -> None:
        """`.hydra/`: the run's config and, for a Hydra job, Hydra's config and the job's overrides, as Hydra writes
        them. repcost writes them (Hydra's own copy is switched off: `hydra.output_subdir: null`) once the directory
        is the run's, so a run refused or moved aside keeps its own, and ensemble members get theirs."""
        self.write_bytes(".hydra/config.yaml", OmegaConf.to_yaml(config).encode())
        if hydra_cfg is not None:
            self.write_bytes(".hydra/hydra.yaml", OmegaConf.to_yaml(hydra_cfg).encode())
            self.write_bytes(".hydra/overrides.yaml", OmegaConf.to_yaml(hydra_cfg.hydra.overrides.task).encode())

    def save_checkpoint(self, obj: dict) -> None:
        atomic_write_bytes(self.file(CHECKPOINT), _torch_bytes(obj))

    def load_checkpoint(self) -> dict:
        return load_checkpoint(self.file(CHECKPOINT))

    def record_failure(self, message: str) -> None:
        """error.txt: the one-line reason a run failed (read by repcost-collect; a relaunch starts over)."""
        self.write_bytes(ERROR, (" ".join(message.split()) + "\n").encode())

    def fail(self, checkpoint: dict, summary: dict, why: str) -> RepcostError:
        """A failed run's files (checkpoint, summary, error.txt); returns the error the run ends with."""
        self.save_checkpoint(checkpoint)
        atomic_write_json(self.file(SUMMARY), summary)
        self.record_failure(why)
        return RepcostError(f"run failed: {why}; summary and checkpoint in {self.path} (a relaunch starts over)")

    def finish(self, checkpoint: dict, summary: dict, run_hash: str) -> None:
        """A finished run's last writes, ordered so that no moment shows a checkpoint claiming `finished` without
        FINISHED: the checkpoint's bytes go to a temp file first, then summary.json, then FINISHED, and only then is
        the temp file renamed onto checkpoint.pt (a rename needs no free space). Any failure before FINISHED leaves
        the previous checkpoint (status running) in place and no temp file."""
        path = self.file(CHECKPOINT)
        staged = path.parent / f".{path.name}.{os.getpid()}.tmp"
        try:
            atomic_write_bytes(staged, _torch_bytes(checkpoint))
            atomic_write_json(self.file(SUMMARY), summary)
            self.write_bytes(FINISHED, (run_hash + "\n").encode())
            with writing(path):
                os.replace(staged, path)
        finally:
            staged.unlink(missing_ok=True)

    def settle_failure(self, message: str) -> None:
        """After a run died with an error once its directory was ready (e.g. a full disk while writing results):
        error.txt when the run trained, has not written its own, and it can be written. (`finish` renames the final
        checkpoint into place only after FINISHED, so no checkpoint claims a result the run never marked.) Never
        raises: the caller is already reporting an error."""
        trained = self.file(CHECKPOINT).exists() or self.file(METRICS).exists()
        if trained and self.finished_hash() is None and not self.file(ERROR).exists():  # else: no failure to record
            with suppress(RepcostError):  # e.g. the disk is still full: the error line on stderr says why
                self.record_failure(message)

    def move_aside(self, why: str) -> Path:
        """Move every result here into a new sibling `<dir>.stale-<time>` (never deleted); returns it.

        The lock file and the open log file stay, so this process keeps both.
        """
        aside = unused_path(self.path.with_name(f"{self.path.name}.stale-{time.strftime('%Y%m%d-%H%M%S')}"))
        with writing(aside):
            aside.mkdir(parents=True)
            for p in self.path.iterdir():
                if p.name != LOCK and p.suffix != ".log":
                    os.replace(p, aside / p.name)
            atomic_write_bytes(aside / "MOVED_ASIDE", (why + "\n").encode())
        return aside

    @contextmanager
    def locked(self) -> Iterator[RunDir]:
        """Hold an exclusive OS lock on the directory for the block; a second holder is refused in one line."""
        with writing(self.path):
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.file(LOCK), os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
                raise RepcostError(f"{self.path} is in use by a running repcost process (pid {holder}); "
                                   "wait for it to end or use another run directory") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield self
        finally:
            os.close(fd)  # releases the lock (a killed process releases it the same way)


def unused_path(base: Path) -> Path:
    """`base`, or where it exists `<base>-1`, `<base>-2`, …: the first that does not exist."""
    path, n = base, 1
    while path.exists():
        path, n = base.with_name(f"{base.name}-{n}"), n + 1
    return path


def _is_litter(p: Path) -> bool:
    """What a start-up leaves before training: log files, the lock, temp files, `.hydra/`, and an ensemble's
    `members/` of directories that hold only such things."""
    if p.is_dir():
        return p.name == ".hydra" or (p.name == "members" and all(
            m.is_dir() and all(_is_litter(q) for q in m.iterdir()) for m in p.iterdir()))
    return p.suffix == ".log" or p.name == LOCK or p.name.endswith(".tmp")


def remove_startup_litter(path: Path) -> bool:
    """Remove a directory that holds nothing but what a start-up leaves before training (`_is_litter`) and whose
    lock no process holds; True if it was removed. Anything else keeps it whole."""
    path = Path(path)
    try:
        entries = list(path.iterdir())
        if not all(_is_litter(p) for p in entries):
            return False
        with RunDir(path).locked():  # held by a live process (a RepcostError): not ours to remove
            for p in {*entries, path / LOCK}:
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
        path.rmdir()  # fails if anything came in meanwhile: it stays
    except (RepcostError, OSError):
        return False
    return True


# -- where runs and sweeps may live ----------------------------------------------------------------
SWEEP_MARKERS = ("last_sweep_jobs.txt", "multirun.yaml", "runs.csv")  # what a multirun leaves in its sweep root
RUN_MARKERS = (".hydra/overrides.yaml", CHECKPOINT, FINISHED, SUMMARY)  # a run's own files
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.]*)\}")


def is_sweep_root(path: Path) -> bool:
    """Whether `path` holds the files a multirun leaves in its sweep directory."""
    return any((path / m).is_file() for m in SWEEP_MARKERS)


def is_run_dir(path: Path) -> bool:
    """Whether `path` holds a run's own files."""
    return any((path / m).exists() for m in RUN_MARKERS)


def check_place(config: DictConfig, key: str) -> Path:
    """The directory of `key` in a Hydra config, hydra.run.dir (a single run's) or hydra.sweep.dir (a multirun's
    root), as an absolute path; RepcostError unless:
    * the sweep `name`, and every config key `${a.b}` the directory's template takes verbatim, is a plain name, so
      a value such as `name=../../etc` cannot move the directory elsewhere (hydra.* keys, resolvers and keys without
      a value are not checked);
    * it is not empty;
    * a run is not a sweep root nor inside one (unless it is an existing job of the sweep, e.g. `--resume
      SWEEP/JOB`), a sweep not a run directory nor inside one."""
    section, leaf = key.rsplit(".", 1)
    template = str(OmegaConf.to_container(OmegaConf.select(config, section), resolve=False).get(leaf) or "")
    for k in dict.fromkeys(["name", *_INTERPOLATION.findall(template)]):  # the sweep name, whatever the templates say
        value = None if k.startswith("hydra.") else OmegaConf.select(config, k, default=None)
        text = str(value)
        if value is not None and (not text.strip() or text in (".", "..") or "/" in text or "\\" in text
                                  or "\0" in text or len(text.encode()) > 200):
            raise ConfigError(k, value, "a plain directory name (no path separators or '..', at most 200 bytes)"
                              + ("" if k == "name" else f"; it names {key}"))
    value, run = OmegaConf.select(config, key, default=None), key == "hydra.run.dir"
    if value is None or not str(value).strip():
        what, default = ("a run", "outputs/runs/…") if run else ("a sweep", "outputs/sweeps/<name>")
        raise RepcostError(f"{key} is empty: {what} needs its own directory (leave the key out for the default "
                           f"{default}, or name a directory)")
    path = Path(os.path.abspath(str(value)))
    job = (path / ".hydra" / "overrides.yaml").is_file()
    for p in [path, *path.parents]:
        if run and is_sweep_root(p) and (p == path or not job):  # a sweep's own job may lie inside it
            kind, why = "a sweep directory", "a single run there would become a bogus job of the sweep"
        elif not run and is_run_dir(p) and not is_sweep_root(p):
            kind, why = "a run directory", "the sweep's jobs would mix with the run's files"
        else:
            continue
        where = "is" if p == path else f"lies inside {p}, which is"
        raise RepcostError(f"{key}={path} {where} {kind}: {why}; choose a directory outside it")
    return path
