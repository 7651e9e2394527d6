"""Aggregate a sweep into tidy tables: one row per job (overrides as columns) and a per-layer table."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from omegaconf import OmegaConf

from .errors import RepcostError
from .rundir import ERROR, FINISHED, SUMMARY
from .runio import atomic_write_bytes, csv_bytes

RUNS_CSV, LAYERS_CSV = "runs.csv", "layers.csv"
LAST_JOBS = "last_sweep_jobs.txt"  # the job dirs of the latest multirun into a sweep dir, one per line


def start_last_jobs(sweep_dir: Path) -> None:
    """Begin a new multirun's list of jobs (jobs of earlier multiruns stay on disk but are no longer "last")."""
    Path(sweep_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(Path(sweep_dir) / LAST_JOBS, b"")


def add_last_job(sweep_dir: Path, job_dir: Path) -> None:
    """Record a job of the current multirun (one appended line: safe from parallel job processes)."""
    line = (str(Path(job_dir).resolve().relative_to(Path(sweep_dir).resolve())) + "\n").encode()
    fd = os.open(Path(sweep_dir) / LAST_JOBS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def last_jobs(sweep_dir: Path):
    """The set of job dirs (relative) of the latest multirun, or None for sweep dirs made before they were recorded."""
    f = Path(sweep_dir) / LAST_JOBS
    return set(f.read_text().split("\n")) - {""} if f.exists() else None


def _value(text: str):
    """An override's value as int/float/bool where it looks like one, else the string."""
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def job_dirs(sweep_dir: Path) -> list[Path]:
    """Every job directory (one holding .hydra/overrides.yaml) under a sweep directory, sorted (runs moved aside left out)."""
    return sorted(p.parent.parent for p in Path(sweep_dir).rglob(".hydra/overrides.yaml")
                  if ".submitit" not in p.parts and not any(".stale-" in part for part in p.parts))


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[key] = v
    return out


def job_overrides(job: Path) -> dict:
    """A job's command-line overrides (hydra.* left out) as {key: value}."""
    out = {}
    for o in OmegaConf.load(job / ".hydra" / "overrides.yaml"):
        k, _, v = str(o).lstrip("+~").partition("=")
        if not k.startswith("hydra"):
            out[k] = _value(v)
    return out


def job_record(job: Path, sweep_dir: Path) -> dict:
    """One job's row: its overrides, status (finished/failed/unfinished), error line, summary scalars."""
    rec = {"job": str(job.relative_to(sweep_dir)) if job != sweep_dir else ".", **job_overrides(job)}
    if (job / ERROR).exists():
        rec.update(status="failed", error=(job / ERROR).read_text().strip())
    elif (job / FINISHED).exists():
        rec.update(status="finished", error="")
    else:
        rec.update(status="unfinished", error="")
    if (job / SUMMARY).exists() and rec["status"] != "unfinished":
        summary = json.loads((job / SUMMARY).read_text())
        rec.update({k: v for k, v in _flatten(summary).items() if k not in rec})
    return rec


def collect(sweep_dir: Path) -> tuple[list[dict], list[dict]]:
    """Write runs.csv and layers.csv into `sweep_dir`; returns (job rows, per-layer rows)."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise RepcostError(f"{sweep_dir}: no such directory")
    jobs = job_dirs(sweep_dir)
    if not jobs:
        raise RepcostError(f"{sweep_dir}: no sweep jobs found (no */.hydra/overrides.yaml below it)")
    rows = [job_record(j, sweep_dir) for j in jobs]
    last = last_jobs(sweep_dir)
    if last is not None:  # job dirs left from an earlier version of the sweep (e.g. before a preset was edited)
        for r in rows:
            r["last_sweep"] = r["job"] in last
    layers = []
    for j, r in zip(jobs, rows):
        table = j / "analysis" / "layers.csv"
        if table.exists():
            keys = {"job": r["job"], **job_overrides(j)}
            with open(table, newline="") as f:  # a per-layer column never overwrites an override column
                layers += [{**keys, **{(k if k not in keys else f"layer_{k}"): v for k, v in row.items()}}
                           for row in csv.DictReader(f)]
    atomic_write_bytes(sweep_dir / RUNS_CSV, csv_bytes(rows))
    if layers:
        atomic_write_bytes(sweep_dir / LAYERS_CSV, csv_bytes(layers))
    return rows, layers

