"""Aggregate a sweep into tidy tables: one row per job (overrides as columns) and a per-layer table."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from .errors import RepcostError, one_line
from .rundir import ERROR, FINISHED, SUMMARY, atomic_write_bytes, csv_bytes, flat, read_summary, remove_dead_temp_files

RUNS_CSV, LAYERS_CSV = "runs.csv", "layers.csv"
LAST_JOBS = "last_sweep_jobs.txt"  # the job dirs of the latest multirun into a sweep dir, one per line (cli.guards)
REFUSED = "last_sweep_refused.txt"  # "<job dir>\t<why>" per job of it refused in a finished run (left untouched)


def parse_value(text: str | None) -> Any:
    """A runs.csv cell or an override's value as Python, by one rule (Hydra's override grammar for scalars):

    * "" (an empty cell) and null (any case) are None;
    * true / false in any case (True, FALSE, …) are booleans;
    * what Python's int() reads is an int ("3", "-2"), then what float() reads is a float ("0.5", "1e-3", "inf", "nan");
    * anything else, lists and dicts such as "[8,8]" included, stays the text as given: a table cell holds one
      value, and the text groups rows and round-trips through runs.csv unchanged.
    """
    if text is None or text == "":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "null": None}.get(text.lower(), text)


def read_table(path: Path, text: tuple[str, ...] = ()) -> list[dict]:
    """Rows of a CSV table written by repcost (runs.csv, layers.csv) as dicts, every cell through parse_value
    but those of the `text` columns (e.g. runs.csv's job directory names, which may look like numbers); cells past
    the header left out. RepcostError naming the table if it cannot be read."""
    try:
        with open(path, newline="") as fh:
            return [{k: (v or "") if k in text else parse_value(v) for k, v in row.items() if k is not None}
                    for row in csv.DictReader(fh)]
    except (OSError, ValueError, csv.Error) as e:
        raise RepcostError(f"{path}: not readable as CSV ({one_line(e)})") from None


def job_overrides(job: Path) -> dict:
    """A job's command-line overrides (hydra.* left out) as {key: value}; RepcostError naming the file if unreadable."""
    import yaml

    f = job / ".hydra" / "overrides.yaml"
    try:
        items = yaml.safe_load(f.read_text())
    except (OSError, ValueError, yaml.YAMLError) as e:
        raise RepcostError(f"{f}: not readable as YAML ({one_line(e)})") from None
    if not isinstance(items, list):
        raise RepcostError(f"{f}: not a list of overrides (holds a {type(items).__name__})")
    pairs = [str(o).lstrip("+~").partition("=") for o in items]
    return {k: parse_value(v) for k, _, v in pairs if not k.startswith("hydra")}


def job_record(job: Path, sweep_dir: Path) -> dict:
    """One job's row: its overrides, status (finished/failed/unfinished), error line, summary scalars.

    A file that cannot be read (a truncated summary.json, a bad overrides.yaml) is a RepcostError naming it."""
    rec = {"job": str(job.relative_to(sweep_dir)) if job != sweep_dir else ".", **job_overrides(job)}
    status = "failed" if (job / ERROR).exists() else "finished" if (job / FINISHED).exists() else "unfinished"
    rec.update(status=status, error=(job / ERROR).read_text(errors="replace").strip() if status == "failed" else "")
    if (job / SUMMARY).exists() and rec["status"] != "unfinished":
        rec.update({k: v for k, v in flat(read_summary(job / SUMMARY), sections=False).items()
                    if k not in rec and (isinstance(v, (int, float, str, bool)) or v is None)})
    return rec


def collect(sweep_dir: Path) -> tuple[list[dict], list[dict], list[str]]:
    """Write runs.csv and layers.csv into `sweep_dir`; returns (job rows, per-layer rows, skipped).

    A job whose files cannot be read is left out of runs.csv, and `skipped` says why, one line per job
    naming the file; if no job can be read, nothing is written and the RepcostError lists the first reason.
    """
    if not sweep_dir.is_dir():
        raise RepcostError(f"{sweep_dir}: no such directory")
    jobs = sorted(p.parent.parent for p in sweep_dir.rglob(".hydra/overrides.yaml")  # runs moved aside left out
                  if ".submitit" not in p.parts and not any(".stale-" in part for part in p.parts))
    if not jobs:
        raise RepcostError(f"{sweep_dir}: no sweep jobs found (no */.hydra/overrides.yaml below it)")
    remove_dead_temp_files(sweep_dir)  # of collects killed while writing runs.csv
    rows, layers, skipped = [], [], []
    last = set((sweep_dir / LAST_JOBS).read_text().split("\n")) - {""} if (sweep_dir / LAST_JOBS).exists() else None
    for j in jobs:
        try:
            r = job_record(j, sweep_dir)
        except RepcostError as e:
            skipped.append(f"{e}; job left out of {RUNS_CSV}")
            continue
        if last is not None:  # job dirs left from an earlier version of the sweep (e.g. before a preset was edited)
            r["last_sweep"] = r["job"] in last
        rows.append(r)
        table = j / "analysis" / "layers.csv"
        try:  # the job's per-layer rows under its keys (a per-layer column never overwrites an override column)
            keys = {"job": r["job"], **job_overrides(j)}
            layers += [{**keys, **{(k if k not in keys else f"layer_{k}"): v for k, v in row.items()}}
                       for row in (read_table(table) if table.exists() else [])]
        except RepcostError as e:
            skipped.append(f"{e}; left out of {LAYERS_CSV}")
    if not rows:
        raise RepcostError(f"{sweep_dir}: none of its {len(jobs)} job(s) could be read ({skipped[0]})")
    atomic_write_bytes(sweep_dir / RUNS_CSV, csv_bytes(rows))
    if layers:
        atomic_write_bytes(sweep_dir / LAYERS_CSV, csv_bytes(layers))
    return rows, layers, skipped
