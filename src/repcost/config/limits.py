"""Limits a valid-looking config must also respect: seeds a generator accepts, sizes the machine can hold.

`check_limits(spec)` runs after schema validation and before anything is allocated. The memory estimate
(`estimate_bytes`) is a lower bound of what training holds at once — parameters with their gradients, optimiser
state and a best-state copy, the activations of one full-batch forward/backward pass, the data as generated
(float64) and as trained on, and Python's own objects per layer and member — so a refusal is never a false alarm
by more than that bound's slack, while a config a thousand times too large is refused in one line instead of
an allocator traceback or a hang.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, RepcostError

SEED_LIMIT = 2**63  # torch generators take 64-bit seeds; keep clear of the sign bit
PARAM_COPIES = 5  # value, gradient, two Adam moments, the best state kept for divergence restores
ACTIVATION_COPIES = 3  # pre-activation, activation, and its gradient per hidden unit and sample
LAYER_OVERHEAD = 4096  # bytes of Python/torch objects per layer and member (modules, tensors, autograd nodes)


def _fields(section) -> dict:
    return {f.name: getattr(section, f.name) for f in dataclasses.fields(section)} if dataclasses.is_dataclass(
        section) else dict(section or {})


def check_seeds(spec) -> None:
    """Every seed (seed, and each `seed`/`*_seed` key of the model and data sections) below 2^63, the ensemble's
    last seed (seed + ensemble_size − 1) included."""
    k = int(getattr(spec.train, "ensemble_size", 1) or 1)
    if spec.seed + k - 1 >= SEED_LIMIT:
        allowed = "an integer in [0, 2^63)" if k == 1 else f"an integer in [0, 2^63 - {k}] (train.ensemble_size={k})"
        raise ConfigError("seed", spec.seed, allowed)
    for prefix, section in (("model", spec.model), ("data", spec.data)):
        for name, value in _fields(section).items():
            if (name == "seed" or name.endswith("_seed")) and isinstance(value, int) and value >= SEED_LIMIT:
                raise ConfigError(f"{prefix}.{name}", value, "an integer in [0, 2^63)")


# -- sizes ---------------------------------------------------------------------------------------------------
def data_shape(data) -> tuple[int, int, int, list[str]]:
    """(samples, d_in, d_out, the keys that set the sample count) of a dataset config, train and test together.
    Known datasets by their own rules; a plugin's from its `n`/`n_*` and `d_in`/`d_out`/`d` keys."""
    f, name = _fields(data), getattr(data, "name", None)
    n_keys = [k for k, v in f.items() if (k == "n" or k.startswith("n_") or k == "points_per_ray")
              and k != "n_classes" and isinstance(v, int)]
    if name == "points_1d":
        n = (len(f["x"]) if f.get("x") else f["n_points"]) + f.get("n_test", 0)
        return n, 1, 1, ["data.n_points", "data.n_test"]
    if name == "two_rays":
        return 2 * f["points_per_ray"], 2, 1, ["data.points_per_ray"]
    if name == "teacher":
        return f["n_train"] + f["n_test"], int(f["widths"][0]), int(f["widths"][-1]), ["data.n_train", "data.n_test"]
    if name == "mnist":
        d_out = 784 if f.get("task") == "autoencoder" else 10
        return f["n_train"] + f["n_test"], 784, d_out, ["data.n_train", "data.n_test"]
    if name == "s_curves":
        c = f["n_classes"]
        return c * (f["n_per_class"] + f["n_test_per_class"]), 2, c, ["data.n_per_class", "data.n_test_per_class"]
    if name == "bipartite":
        return f["n"], f["n"], f["n"], ["data.n"]
    if name == "curve_2d":
        return f["n_train"] + f["n_test"], 2, 2, ["data.n_train", "data.n_test"]
    if name == "projection":
        return f["n_points"] + f["n_test"], f["d"], 1, ["data.n_points", "data.n_test"]
    n = sum(f[k] for k in n_keys)
    d_in = f.get("d_in", f.get("d", 1))
    d_out = f.get("d_out", 1)
    return max(n, 1), int(d_in) if isinstance(d_in, int) else 1, int(d_out) if isinstance(d_out, int) else 1, [
        f"data.{k}" for k in n_keys]


Runs = list[tuple[int, int]]  # a chain of layer widths as (width, how many in a row): a depth of 10^9 stays small


def _runs(widths: list[tuple[int, int]]) -> Runs:
    return [(w, c) for w, c in widths if c > 0]


def _weights(runs: Runs) -> int:
    """Σ n_l·n_{l+1} over consecutive widths of a chain."""
    inside = sum((c - 1) * w * w for w, c in runs)
    return inside + sum(a[0] * b[0] for a, b in zip(runs[:-1], runs[1:]))


def _total(runs: Runs) -> int:
    return sum(w * c for w, c in runs)


def generator_parameters(data) -> int:
    """Parameters of the random networks a dataset draws its targets from (teacher, rank_k), 0 for others."""
    f, name = _fields(data), getattr(data, "name", None)
    if name == "teacher":
        w = [int(x) for x in f["widths"]]
        return sum(a * b + b for a, b in zip(w[:-1], w[1:]))
    if name == "rank_k":
        gh = f.get("g_hidden")
        gh = f["hidden"] if gh is None else gh
        g = f["d_in"] * gh + gh * f["k"] if gh else f["d_in"] * f["k"]
        return g + f["k"] * f["hidden"] + f["hidden"] * f["d_out"]
    return 0


def layer_widths(model, d_in: int, d_out: int) -> tuple[Runs, int]:
    """(the widths d_in, hidden…, d_out of one chain as (width, count) runs, how many parallel chains)."""
    f = _fields(model)
    depth = int(f.get("depth", 2) or 2)
    width = f.get("width", 1)
    name = getattr(model, "name", None)
    if isinstance(width, (list, tuple)):
        hidden = [(int(w), 1) for w in width]
    elif name == "linear_relu":
        hidden = [(int(f.get("linear_width") or width), depth - 2), (int(width), 1)]
    elif name == "parallel":  # each sub-network: d_in -> m … m -> 1
        hidden = [(int(width), depth - 2), (1, 1)]
    else:
        hidden = [(int(width or 1), depth - 1)]
    return _runs([(d_in, 1), *hidden, (d_out, 1)]), int(f.get("n_subnets", 1) or 1)


def parameter_count(model, d_in: int, d_out: int) -> int:
    """The number of parameters of one model: the built-in families exactly, a plugin's as a chain with biases."""
    runs, k = layer_widths(model, d_in, d_out)
    name = getattr(model, "name", None)
    if name == "linear_relu":  # W_1 … W_{L-1}, a; the ReLU layer's bias b and the output offset c
        return _weights(runs) + runs[-2][0] + (d_out if getattr(model, "output_bias", True) else 0)
    if name == "parallel":  # k sub-networks without biases, then α (d_out × k) in place of the chain's last layer
        return k * _weights(runs[:-1]) + d_out * k
    if name == "fc":
        return _weights(runs) + (_total(runs) - d_in if getattr(model, "beta", 1.0) > 0 else 0)
    return k * (_weights(runs) + _total(runs) - d_in)


@dataclass
class SizeEstimate:
    """What one run holds in memory at once (bytes), by part; see the module docstring for the rule."""

    parameters: int  # per member
    members: int
    samples: int
    hidden_units: int  # per member
    layers: int  # per member
    data_bytes: int
    dtype_bytes: int

    @property
    def parts(self) -> dict[str, int]:
        k, b = self.members, self.dtype_bytes
        return {"parameters": PARAM_COPIES * b * self.parameters * k,
                "activations": ACTIVATION_COPIES * b * self.samples * self.hidden_units * k,
                "data": self.data_bytes, "layers": LAYER_OVERHEAD * self.layers * k}

    @property
    def total(self) -> int:
        return sum(self.parts.values())


def estimate_bytes(spec) -> SizeEstimate:
    """A lower bound of the memory a run of `spec` (a validated RunSpec) needs while training."""
    n, d_in, d_out, _ = data_shape(spec.data)
    runs, copies = layer_widths(spec.model, d_in, d_out)
    params = parameter_count(spec.model, d_in, d_out)
    b = 4 if spec.dtype == "float32" else 8
    data_bytes = n * (d_in + d_out) * (8 + b) + 8 * generator_parameters(spec.data)  # float64, then converted
    hidden = _total(runs) - d_in - d_out
    layers = sum(c for _, c in runs) - 1
    return SizeEstimate(params, int(spec.train.ensemble_size), n, copies * hidden, copies * layers, data_bytes, b)


def human_bytes(x: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if x < 1024 or unit == "PiB":
            return f"{x:.3g} {unit}" if unit != "B" else f"{int(x)} B"
        x /= 1024
    return f"{x:.3g} PiB"  # pragma: no cover


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_bytes(device: str = "cpu") -> int | None:
    """Memory a new allocation can get on `device` (CPU: MemAvailable within the cgroup's limit; CUDA: free
    device memory), or None where it cannot be told."""
    if device.startswith("cuda"):
        import torch

        try:
            return int(torch.cuda.mem_get_info(torch.device(device))[0])
        except (RuntimeError, AssertionError):
            return None
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    limit, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        avail = min(avail, limit - used) if avail is not None else limit - used
    return avail


def _keys_of(spec, part: str) -> str:
    """The config keys behind one part of the estimate, with their values."""
    if part == "data":
        return ", ".join(f"{k}={getattr(spec.data, k.split('.', 1)[1])}" for k in data_shape(spec.data)[3]
                         if hasattr(spec.data, k.split(".", 1)[1]))
    keys = [f"model.{k}={v}" for k, v in _fields(spec.model).items()
            if k in ("depth", "width", "linear_width", "n_subnets") and v is not None]
    if part == "activations":
        keys += [f"{k}={getattr(spec.data, k.split('.', 1)[1])}" for k in data_shape(spec.data)[3]
                 if hasattr(spec.data, k.split(".", 1)[1])]
    if spec.train.ensemble_size > 1:
        keys.append(f"train.ensemble_size={spec.train.ensemble_size}")
    return ", ".join(keys)


def check_sizes(spec, available: int | None = None) -> SizeEstimate:
    """Refuse (RepcostError, one line) a run whose estimated memory exceeds what its device has available."""
    est = estimate_bytes(spec)
    device = str(spec.device)
    avail = available if available is not None else available_bytes(device)
    cpu_avail = available if available is not None or not device.startswith("cuda") else available_bytes("cpu")
    for need, have, where in ((est.total, avail, device), (est.data_bytes, cpu_avail, "cpu")):
        if have is not None and need > have:
            parts = est.parts if where == device else {"data": est.data_bytes}
            part = max(parts, key=parts.get)
            what = {"parameters": f"{est.parameters:.3g} parameters per model",
                    "activations": f"{est.samples:.3g} samples × {est.hidden_units:.3g} hidden units",
                    "data": f"{est.samples:.3g} samples", "layers": f"{est.layers:.3g} layers per model"}[part]
            members = f" × {est.members} members" if est.members > 1 and part != "data" else ""
            raise RepcostError(f"{_keys_of(spec, part)}: this run needs at least {human_bytes(need)} of memory "
                               f"({part}: {what}{members}), more than the {human_bytes(have)} available on {where}; "
                               "choose smaller sizes")
    return est


def check_limits(spec) -> SizeEstimate:
    """Seeds and sizes of a validated RunSpec (see check_seeds, check_sizes)."""
    check_seeds(spec)
    return check_sizes(spec)

