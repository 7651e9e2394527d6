"""Limits a valid-looking config must also respect: seeds a generator takes, sizes the machine can hold.

`check_limits` runs at validation, before anything is built: members × depth layers, and the parameters a family
declares (`param_count(d_in, d_out)` on its config, at d_in = d_out = 1: a lower bound). Data, activations and GPU
memory are left to the allocator, whose refusal `allocating` turns into one line.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from ..errors import ConfigError, RepcostError

SEED_LIMIT = 2**63  # torch generators take 64-bit seeds; keep clear of the sign bit
PARAM_COPIES = 5  # value, gradient, two Adam moments, the best state kept for divergence restores
LAYER_BYTES = 4096  # Python/torch objects per layer and member (modules, tensors, autograd nodes)
REFUSED = ("allocate", "memory", "overflow", "too big", "maximum allowed")  # how allocators and shapes refuse a size


def _ints(spec) -> list[tuple[str, int]]:
    return [(f"{p}.{f.name}", getattr(s, f.name)) for p, s in (("model", spec.model), ("data", spec.data))
            for f in dataclasses.fields(s) if type(getattr(s, f.name)) is int]  # bools aside


def sizes(spec) -> str:
    """The sizes a config sets, as `key=value`: its integer model and data keys (seeds aside), the ensemble size."""
    k = spec.train.ensemble_size
    keys = [f"{key}={v}" for key, v in _ints(spec) if not key.endswith("seed")]
    return ", ".join(keys + ([f"train.ensemble_size={k}"] if k > 1 else []))


def check_limits(spec) -> None:
    """Every seed below 2^63 (an ensemble's last, seed + ensemble_size − 1, too); then the models' memory."""
    k = spec.train.ensemble_size
    for key, value in [("seed", spec.seed + k - 1), *_ints(spec)]:
        if key.endswith("seed") and value >= SEED_LIMIT:
            allowed = f"[0, 2^63 - {k}] (train.ensemble_size={k})" if key == "seed" and k > 1 else "[0, 2^63)"
            raise ConfigError(key, spec.seed if key == "seed" else value, f"an integer in {allowed}")
    count = getattr(spec.model, "param_count", None)
    params = count(1, 1) if count is not None else 0
    depth = dict(_ints(spec)).get("model.depth", 1)  # a plugin's family may have no depth, or a depth of its own kind
    need = k * (PARAM_COPIES * spec.torch_dtype.itemsize * params + LAYER_BYTES * depth)
    have = available_bytes()
    if have is not None and need > have:
        raise RepcostError(f"{sizes(spec)}: the models need at least {need / 2**30:.3g} GiB of memory ({params:.3g} "
                           f"parameters each), more than the {have / 2**30:.3g} GiB available; choose smaller sizes")


def available_bytes() -> int | None:
    """Memory a new allocation can get (MemAvailable), None where unknown: every model is built in CPU memory first,
    and Linux may grant more than that, then kill the process that touches it (a GPU's allocator refuses in time)."""
    meminfo = Path("/proc/meminfo")
    lines = [ln for ln in meminfo.read_text().splitlines() if ln.startswith("MemAvailable:")] if meminfo.exists() else []
    return int(lines[0].split()[1]) * 1024 if lines else None


@contextlib.contextmanager
def allocating(spec, what: str):
    """The allocator's refusal of a size (or a shape too large to express) while building `what`: one line."""
    try:
        yield
    except (MemoryError, OverflowError, RuntimeError, ValueError, TypeError) as e:
        line = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if not isinstance(e, (MemoryError, OverflowError)) and not any(s in line.lower() for s in REFUSED):
            raise
        raise RepcostError(f"{sizes(spec)}: cannot allocate {what} ({line}); choose smaller sizes") from None
