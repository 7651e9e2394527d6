"""Sweeps on a real SLURM cluster: array jobs, preemption, time limits, relaunch (`make slurm-up && make test-slurm`).

The tests marked `slurm` run against the single-node cluster of cluster/slurm.sh (partitions `low`, the
default, preemptible, and `high`, which preempts it) and are skipped where no cluster answers. They run
in file order and share one work directory: the last one relaunches the sweeps the others made.

What "identical" means here: a run that was preempted or timed out, requeued and resumed must end with
the same summary.json and metrics.jsonl as the same config run once without interruption, compared
field by field, exactly (float64, same machine). Excluded: `wall_time_s` in summary.json and `time_s`
in metrics.jsonl, because they measure elapsed time (a resumed run counts its own attempts only).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from repcost.train.preempt import StopFlag, stop_on_signals

ROOT = Path(__file__).resolve().parents[1]
TRAIN = [sys.executable, "-m", "repcost.cli.train"]
SLURM = ["hydra/launcher=slurm", "hydra.launcher.mem_gb=1"]
# A float64 Savarese-style fit that takes a while: 2-layer ReLU net on the 1-D points, Adam only.
# Periodic checkpoints are what a requeued job resumes from (submitit exits on the signal at once).
RUN = ["model=linear_relu", "data=points_1d", "model.width=100", "dtype=float64", "device=cpu", "train=adam",
       "train.log_every=500", "train.checkpoint_every=2000", "train.progress=false"]
NOT_COMPARED = {"summary": {"wall_time_s"}, "metrics": {"time_s"}}  # elapsed times (module docstring)
TIMEOUT = 600  # per subprocess; the whole module takes a few minutes


def _cluster_up() -> bool:
    if shutil.which("scontrol") is None or shutil.which("sbatch") is None:
        return False
    try:
        return subprocess.run(["scontrol", "ping"], check=False, capture_output=True, timeout=15).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def work() -> Path:
    """The shared work directory; skips the module's SLURM tests where no cluster is up.

    Not under pytest's tmp_path: a pytest session started meanwhile (by anyone on this machine) prunes
    all but the newest three of those, and SLURM jobs would lose their run directories mid-test. It is
    kept afterwards, for the logs of the jobs.
    """
    if not _cluster_up():
        pytest.skip("no SLURM cluster (make slurm-up)")
    d = Path(tempfile.mkdtemp(prefix="repcost-test-slurm-"))
    print(f"SLURM test work directory: {d}")
    return d


# Filled by the tests for the relaunch test at the end: (command, cwd, sweep dir) of each finished sweep.
SWEEPS: dict[str, tuple[list[str], Path, Path]] = {}


def _env() -> dict:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg"}


def _start(cmd: list[str], cwd: Path, log: Path) -> subprocess.Popen:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(cmd, cwd=cwd, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=_env())


def _finish(p: subprocess.Popen, log: Path, what: str, code: int = 0) -> str:
    try:
        p.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    out = log.read_text()
    assert p.returncode == code, f"{what} exited {p.returncode}:\n{out[-4000:]}"
    return out


def _rows(sweep: Path) -> list[dict]:
    with open(sweep / "runs.csv", newline="") as f:
        return list(csv.DictReader(f))


def _job_dirs(sweep: Path) -> list[Path]:
    return sorted(d for d in sweep.iterdir() if d.is_dir() and (d / ".hydra").is_dir())


def _submitit_logs(sweep: Path) -> str:
    """All submitit stdout/stderr of a sweep (every job, every attempt), for assertions and failure messages."""
    return "\n".join(f.read_text(errors="replace") for f in sorted((sweep / ".submitit").glob("*/*_log.*")))


def _sacct_states(job_id: str) -> list[str]:
    """States of every attempt of a job (-D: requeued attempts too), allocation lines only (-X).

    Waits (up to 60 s) until the last attempt's state is final: submitit hands back a job's result as soon as
    the job wrote it, a moment before the job ends and slurmdbd records that.
    """
    deadline = time.time() + 60
    while True:
        p = subprocess.run(["sacct", "-n", "-P", "-X", "-D", "-j", job_id, "-o", "State"], check=False,
                           capture_output=True, text=True, timeout=60)
        states = [s.split()[0] for s in p.stdout.split()]
        if states and states[-1] not in ("PENDING", "RUNNING", "COMPLETING", "REQUEUED") or time.time() > deadline:
            return states
        time.sleep(1)


def _slurm_job_id(sweep: Path) -> str:
    """The SLURM id of a one-job sweep's job: submitit's folder that holds the job's logs is named by it
    (`<id>` for a single job, `<array id>_<index>` for a task of an array)."""
    ids = {d.name for d in (sweep / ".submitit").iterdir() if any(d.glob("*_log.err"))}
    assert len(ids) == 1, ids
    return ids.pop()


def _resumed_from(run_dir: Path) -> list[int]:
    """The steps a run resumed from, per its train.log (one entry per resumed attempt)."""
    return [int(s) for s in re.findall(r"resuming .* from step (\d+)", (run_dir / "train.log").read_text())]


def _assert_identical(ref: Path, run: Path) -> None:
    """summary.json and metrics.jsonl of `run` equal those of the uninterrupted `ref`, except elapsed times."""
    a, b = (json.loads((d / "summary.json").read_text()) for d in (ref, run))
    assert a.keys() == b.keys()
    for k in a.keys() - NOT_COMPARED["summary"]:
        assert a[k] == b[k], f"summary.json {k}: {a[k]!r} uninterrupted, {b[k]!r} resumed"
    la, lb = ((d / "metrics.jsonl").read_text().splitlines() for d in (ref, run))
    assert len(la) == len(lb), f"metrics.jsonl: {len(la)} lines uninterrupted, {len(lb)} resumed"
    for line_a, line_b in zip(la, lb, strict=True):
        x, y = json.loads(line_a), json.loads(line_b)
        for k in NOT_COMPARED["metrics"]:
            x.pop(k, None), y.pop(k, None)
        assert x == y, f"metrics.jsonl line of step {x.get('step')} differs"


def _reference(work: Path, name: str, args: list[str]) -> tuple[subprocess.Popen, Path, Path]:
    """Start the uninterrupted run of `args` on this machine, outside SLURM (same code, same float64 numbers)."""
    run_dir = work / "ref" / name
    log = work / f"ref-{name}.log"
    return _start(TRAIN + args + [f"hydra.run.dir={run_dir}"], work, log), run_dir, log


def _steps_per_second(run_dir: Path) -> float:
    s = json.loads((run_dir / "summary.json").read_text())
    return s["steps"] / s["wall_time_s"]


# ------------------------------------------------------------------------------------------------------------
@pytest.mark.slurm
def test_figure_sweep_runs_as_an_array_job(work: Path) -> None:
    """`make sweep-savarese19-fig1 LAUNCHER=slurm`, into a work dir: one array job, runs.csv complete, figure drawn."""
    wd = work / "fig"
    cmd = [sys.executable, str(ROOT / "experiments" / "savarese19-fig1.py"), "--launcher", "slurm",
           "--workdir", str(wd), "--out", str(wd / "figures")]
    out = _finish(_start(cmd, work, work / "fig.log"), work / "fig.log", "savarese19-fig1 on SLURM")
    sweep = wd / "outputs" / "sweeps" / "savarese19-fig1-quick"
    rows = _rows(sweep)
    assert sorted(int(r["model.width"]) for r in rows) == [20, 100]
    assert {r["status"] for r in rows} == {"finished"}, rows
    # one array job: submitit's folders are <array id>_<index>, and SLURM accounted each task as completed
    tasks = sorted(d.name for d in (sweep / ".submitit").iterdir() if re.fullmatch(r"\d+_\d+", d.name))
    assert len(tasks) == 2 and len({t.split("_")[0] for t in tasks}) == 1, tasks
    assert sorted(t.split("_")[1] for t in tasks) == ["0", "1"]
    for t in tasks:
        assert _sacct_states(t)[-1] == "COMPLETED", (t, _sacct_states(t))
    # the figure script drew from exactly those runs
    assert (wd / "figures" / "savarese19-fig1.png").stat().st_size > 0
    with open(wd / "figures" / "savarese19-fig1.csv", newline="") as f:
        drawn = {r["path"] for r in csv.DictReader(f) if r["path"]}
    assert drawn == {str(sweep / r["job"]) for r in rows}
    assert "wrote" in out
    SWEEPS["figure"] = (cmd, work, sweep)


@pytest.mark.slurm
def test_preempted_job_is_requeued_and_resumes_identically(work: Path) -> None:
    """A float64 job in `low`, preempted by a whole-node job in `high`: signalled, requeued, resumed, identical."""
    args = [*RUN, "train.phases.0.steps=60000"]
    ref_proc, ref, ref_log = _reference(work, "preempt", args)
    wd = work / "preempt"
    cmd = TRAIN + ["-m", "name=preempt", *args, *SLURM, "hydra.launcher.partition=low",
                   "hydra.launcher.timeout_min=30"]  # > 10 min: submitit counts any signal as a timeout below that
    sweep_proc = _start(cmd, wd, work / "preempt.log")
    sweep = wd / "outputs" / "sweeps" / "preempt"
    # preempt once the job has made progress worth keeping: several periodic checkpoints (metrics logged
    # every 500 steps, a checkpoint every 2000)
    deadline = time.time() + TIMEOUT
    while sum(len(m.read_text().splitlines()) for m in sweep.glob("*/metrics.jsonl")) < 4 * 2000 // 500 + 1:
        assert sweep_proc.poll() is None, (work / "preempt.log").read_text()[-4000:]
        assert time.time() < deadline, "the low job never checkpointed"
        time.sleep(0.2)
    high = subprocess.run(["sbatch", "--parsable", "-p", "high", "--exclusive", "-o", "/dev/null", "-J", "high",
                           "--wrap", "sleep 5"], check=False, capture_output=True, text=True, timeout=60)
    assert high.returncode == 0, high.stderr
    _finish(sweep_proc, work / "preempt.log", "preempted sweep")
    _finish(ref_proc, ref_log, "uninterrupted run")

    (row,) = _rows(sweep)
    assert row["status"] == "finished", row
    run = sweep / row["job"]
    job = _slurm_job_id(sweep)
    logs = _submitit_logs(sweep)
    # signalled (submitit's USR2, delivered at preemption), requeued by SLURM, resumed from a checkpoint
    assert "Caught signal SIGUSR2" in logs and "this job is preempted" in logs, logs[-3000:]
    states = _sacct_states(job)
    assert states[0] in ("REQUEUED", "PREEMPTED") and states[-1] == "COMPLETED", states
    assert _resumed_from(run) and _resumed_from(run)[0] >= 4 * 2000, (run / "train.log").read_text()[-2000:]
    _assert_identical(ref, run)
    SWEEPS["preempt"] = (cmd, wd, sweep)


@pytest.mark.slurm
def test_time_limit_requeues_and_a_hopeless_job_fails_alone(work: Path) -> None:
    """timeout_min=1: a job longer than that is signalled, requeued, finishes identically; one that can never
    finish within max_num_timeout requeues fails with error.txt, and the short job of its sweep is intact."""
    # slurmctld looks at time limits every 30 s and sends the signal at the first look that finds less than
    # signal_delay_s + 30 s left: with a 1 min limit and 15 s, 15-45 s after the job started. Earlier would be
    # unsafe: a job signalled in its first seconds, before submitit installed its handler, is killed outright.
    # So ~60 s of work at this machine's speed (measured on the previous test's run) needs 2+ attempts; it
    # may get up to 11 (max_num_timeout=10), for attempts as short as ~15 s less the job's start-up.
    speed = _steps_per_second(work / "ref" / "preempt") if (work / "ref" / "preempt" / "summary.json").exists() \
        else 2000.0
    steps = int(60 * speed) // 2000 * 2000 + 2000
    limit = ["hydra.launcher.timeout_min=1", "hydra.launcher.signal_delay_s=15"]
    args = [*RUN, f"train.phases.0.steps={steps}"]
    ref_proc, ref, ref_log = _reference(work, "limit", args)
    wd = work / "limit"
    cmd = TRAIN + ["-m", "name=limit", *args, *SLURM, *limit, "hydra.launcher.max_num_timeout=10"]
    limit_proc = _start(cmd, wd, work / "limit.log")
    # the hopeless job (10^9 steps) beside a short one, with 1 requeue allowed
    wd2 = work / "budget"
    cmd2 = TRAIN + ["-m", "name=budget", *RUN, "train.phases.0.steps=2000,1000000000", *SLURM, *limit,
                    "hydra.launcher.max_num_timeout=1"]
    budget_proc = _start(cmd2, wd2, work / "budget.log")
    _finish(limit_proc, work / "limit.log", "time-limited sweep")
    # a sweep with a failed job exits 1, its last line naming the failed job's error.txt
    out = _finish(budget_proc, work / "budget.log", "sweep with a hopeless job", code=1)
    assert "1 of 2 jobs failed: see" in out.strip().splitlines()[-1] and "error.txt" in out, out[-2000:]
    _finish(ref_proc, ref_log, "uninterrupted run")

    sweep = wd / "outputs" / "sweeps" / "limit"
    (row,) = _rows(sweep)
    assert row["status"] == "finished", row
    run = sweep / row["job"]
    logs = _submitit_logs(sweep)
    assert "this job is timed-out" in logs, logs[-3000:]
    assert "REQUEUED" in _sacct_states(_slurm_job_id(sweep))
    assert _resumed_from(run) and all(s > 0 for s in _resumed_from(run)), (run / "train.log").read_text()[-2000:]
    _assert_identical(ref, run)
    SWEEPS["limit"] = (cmd, wd, sweep)

    sweep2 = wd2 / "outputs" / "sweeps" / "budget"
    rows = {int(r["train.phases.0.steps"]): r for r in _rows(sweep2)}
    short, hopeless = rows[2000], rows[1000000000]
    assert short["status"] == "finished" and not short["error"], short
    assert hopeless["status"] == "failed", hopeless
    hop = sweep2 / hopeless["job"]
    err = (hop / "error.txt").read_text()
    assert "timed-out too many times" in err, err
    assert not (hop / "FINISHED").exists() and not (hop / "summary.json").exists()
    # the hopeless job was requeued once (max_num_timeout=1) and its second time limit ended it
    hop_logs = "\n".join(f.read_text() for f in sorted((sweep2 / ".submitit").glob("*/*_log.err"))
                         if hopeless["job"] in f.read_text())
    assert hop_logs.count("this job is timed-out") == 2, hop_logs[-3000:]
    sd = sweep2 / short["job"]
    assert (sd / "FINISHED").exists() and json.loads((sd / "summary.json").read_text())["status"] == "finished"
    assert not (sd / "error.txt").exists()


def _snapshot(sweep: Path) -> dict:
    """Bytes and modification times of every job's run files: a job that ran again would change them."""
    snap = {}
    for d in _job_dirs(sweep):
        for name in ("summary.json", "metrics.jsonl", "checkpoint.pt", "FINISHED"):
            f = d / name
            snap[f] = (f.read_bytes(), f.stat().st_mtime_ns) if f.exists() else None
    return snap


@pytest.mark.slurm
def test_stacked_sweep_is_one_slurm_job_and_equals_single_runs(work: Path) -> None:
    """`hydra/launcher=stacked hydra.launcher.submitit=slurm`: a 2 λ × 2 seed grid is one SLURM job whose four
    job dirs hold what four single runs on this machine give (float64: equal to 1e-12)."""
    grid = ["model=fc", "model.depth=3", "model.width=8", "data=teacher", "data.n_train=32", "data.n_test=0",
            "dtype=float64", "device=cpu", "train.phases.0.steps=300", "train.progress=false",
            "seed=0,1", "train.lam=1e-3,1e-2"]
    stacked = TRAIN + ["-m", *grid, "name=stacked", "hydra/launcher=stacked", "hydra.launcher.submitit=slurm",
                       "++hydra.launcher.submitit_params={timeout_min: 10, mem_gb: 1, cpus_per_task: 1}"]
    single = TRAIN + ["-m", *grid, "name=single"]
    wd = work / "stacked"
    for cmd, tag in ((stacked, "stacked"), (single, "single")):
        _finish(_start(cmd, wd, work / f"{tag}.log"), work / f"{tag}.log", f"{tag} grid")
    sweep, ref = wd / "outputs" / "sweeps" / "stacked", wd / "outputs" / "sweeps" / "single"
    rows = _rows(sweep)
    assert len(rows) == 4 and {r["status"] for r in rows} == {"finished"}, rows
    jobs = [d.name for d in (sweep / ".submitit").iterdir() if any(d.glob("*_log.out"))]
    assert len(jobs) == 1, jobs  # the whole grid is one stacked process
    assert _sacct_states(jobs[0])[-1] == "COMPLETED"
    for d in _job_dirs(sweep):
        a = json.loads((d / "summary.json").read_text())
        b = json.loads((ref / d.name / "summary.json").read_text())
        assert a["config_hash"] == b["config_hash"] and a["steps"] == b["steps"]
        for k in ("objective", "train_loss", "param_sq_norm", "cost"):
            assert abs(a[k] - b[k]) <= 1e-12 * abs(b[k]), (d.name, k, a[k], b[k])
    SWEEPS["stacked"] = (stacked, wd, sweep)


@pytest.mark.slurm
def test_relaunched_sweeps_run_nothing_new(work: Path) -> None:
    """The finished sweeps, relaunched with the same commands: every job is skipped, no run file changes.

    (The sweep with the hopeless job is not relaunched: a failed job reruns on relaunch, by design.)
    """
    if not {"figure", "preempt", "limit"} <= set(SWEEPS):
        pytest.skip(f"needs the sweeps of the tests above (have {sorted(SWEEPS)})")
    before = {k: _snapshot(s) for k, (_, _, s) in SWEEPS.items()}
    old_jobs = {k: {d.name for d in (s / ".submitit").iterdir()} for k, (_, _, s) in SWEEPS.items()}
    procs = {k: _start(cmd, cwd, work / f"relaunch-{k}.log") for k, (cmd, cwd, _) in SWEEPS.items()}
    for k, p in procs.items():
        _finish(p, work / f"relaunch-{k}.log", f"relaunched {k} sweep")
    for k, (_, _, sweep) in SWEEPS.items():
        assert _snapshot(sweep) == before[k], f"{k}: a job's run files changed on relaunch"
        assert {r["status"] for r in _rows(sweep)} == {"finished"}
        new = [sweep / ".submitit" / d for d in {d.name for d in (sweep / ".submitit").iterdir()} - old_jobs[k]]
        outs = "\n".join(f.read_text() for d in new for f in d.glob("*_log.out"))
        n_jobs = len(_job_dirs(sweep))
        assert outs.count("already finished") == n_jobs, f"{k}: {outs[-3000:]}"


# ------------------------------------------------------------------------------------------------------------
def test_stop_on_signals_catches_a_launchers_signal_first_and_keeps_sigcont_default() -> None:
    """submitit's USR2 handler is chained (the run checkpoints first, hand_back() then calls it); SIGCONT takes its
    default action during training; handlers are restored afterwards."""
    seen = []
    old = signal.signal(signal.SIGUSR2, lambda s, f: seen.append(s))
    old_cont = signal.signal(signal.SIGCONT, lambda s, f: seen.append(s))
    try:
        flag = StopFlag()
        with stop_on_signals(flag):
            signal.raise_signal(signal.SIGUSR2)
            assert seen == [] and flag.signal == signal.SIGUSR2  # the run stops and checkpoints first
            signal.raise_signal(signal.SIGCONT)  # default action during training (preempt's docstring)
            assert seen == [] and signal.getsignal(signal.SIGCONT) == signal.SIG_DFL
        assert callable(signal.getsignal(signal.SIGCONT))  # the launcher's handlers are back
        flag.hand_back()  # after the checkpoint: submitit's handler requeues (and, for real, exits)
        assert seen == [signal.SIGUSR2]
    finally:
        signal.signal(signal.SIGUSR2, old)
        signal.signal(signal.SIGCONT, old_cont)
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
