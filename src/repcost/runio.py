"""I/O primitives: atomic writes with umask permissions and one-line errors, JSON (provenance: repcost.provenance)."""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .errors import io_error


def jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, torch.Tensor):
        return jsonable(x.detach().cpu().tolist())
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return str(x)  # JSON has no NaN/inf
    return x


def leaves(d: dict, sep: str = ".", prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(joined key, value) of every leaf of a nested dict (lists are leaves)."""
    for k, v in d.items():
        if isinstance(v, dict):
            yield from leaves(v, sep, f"{prefix}{k}{sep}")
        else:
            yield f"{prefix}{k}", v


FILE_MODE = 0o666  # os.open applies the umask: 0644 under the usual 022, so a lab group can read results


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temp file in the same folder and a rename; OSError -> one line."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
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
    except OSError as e:
        raise io_error(path, e) from None


def append_line(path: Path, line: str) -> None:
    """Append `line` and a newline to `path` in one write (O_APPEND): lines of parallel processes never mix."""
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


def config_hash(cfg: dict) -> str:
    """A short stable hash of a plain-dict config (sorted JSON, sha256)."""
    return hashlib.sha256(json.dumps(jsonable(cfg), sort_keys=True).encode()).hexdigest()[:12]


def csv_bytes(rows: list[dict]) -> bytes:
    """Rows of dicts as CSV bytes, columns in first-seen order (missing cells empty)."""
    import csv

    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode()
