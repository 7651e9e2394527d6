"""Run identity: the part of a run config that defines its result, and its hash.

A run directory is reused (skipped when finished, resumed when preempted) exactly when the hash
of its config's identity equals the new config's. The identity is the config with, generically,
every key left out that sits at its schema default, and the keys whose schema field says
`metadata={"identity": False}` (names, progress bars, checkpoint cadence). So adding a schema
key with a default never changes an existing run's hash. A nested section (`train.certify`) away from its
default counts whole; a key added to one later is marked `metadata={"identity": "set"}` and counts only where
it is not at its default, so the section of an earlier run hashes as it did. `device` counts by what it resolves to
(cpu or cuda), so `device=auto` and `device=cpu` on a CPU machine are the same run. `identity_changes` says what
makes a finished run stale.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import typing
from collections.abc import Sequence
from typing import Any

import torch
from omegaconf import OmegaConf

from .config.schema import AnalysisConfig, TopLevelConfig, TrainConfig
from .errors import RepcostError
from .provenance import repcost_version
from .registry import DATASETS, MODELS
from .rundir import flat, jsonable

_ABSENT = object()  # a key one of two configs lacks


@functools.cache
def _defaults(schema: type) -> tuple[dict, dict[str, Any]]:
    """A schema's defaults as plain values, and each field's type (a nested section's: its schema)."""
    return OmegaConf.to_container(OmegaConf.structured(schema)), typing.get_type_hints(schema)


def strip_defaults(node: dict, schema: type) -> dict:
    """`node` without keys at their `schema` default or marked identity=False; list fields whose
    elements are dataclasses (`list[PhaseConfig]`) are stripped element-wise."""
    fields, (defaults, types) = {f.name: f for f in dataclasses.fields(schema)}, _defaults(schema)
    out = {}
    for k, v in node.items():
        f = fields.get(k)
        if f is None:  # not in the schema (validation refuses these before a run starts)
            out[k] = v
            continue
        if f.metadata.get("identity", True) is False:
            continue
        default, element = defaults[k], (typing.get_args(types[k]) or [None])[0]
        if dataclasses.is_dataclass(element) and isinstance(v, list):
            v = [strip_defaults(e, element) if isinstance(e, dict) else e for e in v]
            default = [strip_defaults(e, element) for e in default] if isinstance(default, list) else default
        elif dataclasses.is_dataclass(types[k]) and isinstance(v, dict):  # a nested section
            v, default = _without_unset(v, types[k]), _without_unset(default, types[k])
        if k == "name" or v != default:  # a section's registry name says which schema the rest is read against
            out[k] = v
    return out


def _without_unset(node: dict, schema: type) -> dict:
    """A nested section without its keys marked identity="set" that sit at their default."""
    unset = {f.name for f in dataclasses.fields(schema) if f.metadata.get("identity") == "set"}
    return {k: v for k, v in node.items() if k not in unset or v != _defaults(schema)[0][k]}


def run_identity(cfg: dict) -> dict:
    """The result-defining part of a resolved run config (a plain dict, as saved with the run)."""
    out = strip_defaults({k: v for k, v in cfg.items() if k not in ("model", "data", "train", "analysis", "device")},
                         TopLevelConfig)
    device = str(cfg.get("device", "auto"))  # auto, cpu or cuda[:i] (validated)
    out["device"] = "cuda" if device.startswith("cuda") or device == "auto" and torch.cuda.is_available() else "cpu"
    schemas = {"train": TrainConfig, "analysis": AnalysisConfig}
    for key, node in cfg.items():
        if key in ("model", "data") and isinstance(node, dict) and "name" in node:
            out[key] = strip_defaults(node, (MODELS if key == "model" else DATASETS).get(node["name"]).schema)
        elif key in schemas and isinstance(node, dict):
            out[key] = strip_defaults(node, schemas[key])
    return out


def run_hash(cfg: dict) -> str:
    """The hash that names a run's identity (written to FINISHED and summary.json): sorted JSON, sha256, 12 digits."""
    return hashlib.sha256(json.dumps(jsonable(run_identity(cfg)), sort_keys=True).encode()).hexdigest()[:12]


# Runs that differ only in these keys can train as one stacked engine (train.run.train_runs); N: any phase
STACKABLE_KEYS = ("seed", "train.lam", "train.phases.N.lr", "model.init_scale")
_STACKABLE = re.compile("|".join(re.escape(k).replace("N", r"\d+") for k in STACKABLE_KEYS))


def shared_part(cfg: dict) -> dict[str, Any]:
    """What runs stacked in one process must share: the run config's `flat` keys but `STACKABLE_KEYS`."""
    return {k: v for k, v in flat(cfg).items() if not _STACKABLE.fullmatch(k)}


def stack_key(cfg: dict) -> str | None:
    """The grouping key of runs stacked in one process (`shared_part`); None for a run that cannot be
    stacked with others (an ensemble, `train.ensemble_size` > 1)."""
    train = cfg.get("train")
    if isinstance(train, dict) and int(train.get("ensemble_size", 1) or 1) != 1:
        return None
    return json.dumps(shared_part(cfg), sort_keys=True, default=str)


def check_stackable(cfgs: Sequence[dict]) -> None:
    """Runs trained in one engine may differ only in `STACKABLE_KEYS`: RepcostError naming the first other key."""
    a = shared_part(cfgs[0]) if cfgs else {}  # the first run's, once
    for i, b in enumerate(map(shared_part, cfgs[1:]), 1):
        if diff := [k for k in a.keys() | b.keys() if a.get(k, _ABSENT) != b.get(k, _ABSENT)]:
            raise RepcostError(f"run {i} cannot be stacked with run 0: its {min(diff)} differs; stacked runs may "
                               f"differ only in {', '.join(STACKABLE_KEYS)}")


def identity_changes(old: dict, new: dict, old_version: str | None = None) -> str:
    """What differs between the identities (`identity.run_identity`) of two run configs, in words: the config keys
    with both values, the plugins whose source changed; where no key differs, the identity rules of another
    repcost version."""
    try:
        a, b = flat(run_identity(old)), flat(run_identity(new))
    except RepcostError as e:  # the old run's family or dataset is no longer registered
        return str(e)
    full_a, full_b = flat(old), flat(new)  # (an identity leaves out keys at their defaults: values from here)
    short = lambda v: repr(v) if len(repr(v)) <= 30 else repr(v)[:27] + "..."  # noqa: E731
    words = [f"source of plugin {k.split('.', 1)[1]}" if k.startswith("plugin_sources.")
             else f"{k}: {short(full_a.get(k))} -> {short(full_b.get(k))}"
             for k in sorted(a.keys() | b.keys()) if a.get(k, _ABSENT) != b.get(k, _ABSENT)]
    if not words:
        return f"no config key: the identity rules of repcost {old_version or '?'} (this is {repcost_version()})"
    return ", ".join(words[:4]) + (f" and {len(words) - 4} more" if len(words) > 4 else "")

