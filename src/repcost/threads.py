"""How many CPU threads torch uses in a run: the `threads` key (`auto`, or an integer >= 1).

`threads=N` uses N threads. `threads=auto` (`choose`) uses OMP_NUM_THREADS where it is set (a user or a cluster
script has chosen), and otherwise:

- 1 thread for a small step: samples × parameters below `SMALL_WORK` = 1e5. Its largest product is under ~1e5
  multiply-adds (tens of µs), too small to split; extra threads only add synchronisation, which costs tens of ms
  per step as soon as another process competes for the cores.
- else this job's share of the cores (the cores it may use, divided among the jobs its launcher runs at once),
  and no more than the cores no other task is running on right now (`busy_elsewhere`). Jacot et al. 2022's MNIST
  net gets both cores of an idle 2-core machine and one beside a busy process, where a second thread makes its
  steps several times slower.

`benchmarks/threads.py` measures the rule against 1, 2 and all threads. Threads are set (`apply`) at a job's
start and again once its model's size is known (`fit_to_model`), only in a repcost-train job: code that calls
repcost as a library (a notebook, a test) keeps its own torch setting.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import torch

# samples × parameters of one full-batch step below which a run trains on one thread. The demo (10 × 301 = 3e3)
# sits below it; Jacot et al. 2022's MNIST net (42 × 42k = 1.8e6) and Jacot 2023's Fig 1 net (2000 × 91k = 1.8e8)
# above, where the free cores decide (benchmarks/threads.py).
SMALL_WORK = 1e5


def cores_available() -> int:
    """CPU cores this process may run on: its affinity mask, within a cgroup v2 CPU quota if one is set."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    with contextlib.suppress(OSError, ValueError):
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(float(quota) / float(period))))
    return max(1, cores)


def own_running_threads() -> int:
    """Threads of this process that are runnable right now (at least this one): e.g. torch's OpenMP workers,
    which keep spinning for a while after a parallel operation."""
    states = []
    for stat in Path("/proc/self/task").glob("*/stat"):
        with contextlib.suppress(OSError, ValueError):  # (a thread that ended meanwhile)
            text = stat.read_text()
            states.append(text[text.rindex(")") + 2])  # the state follows the parenthesised name
    return max(1, states.count("R"))


def busy_elsewhere() -> int:
    """Tasks running right now other than this process's threads: Linux's run queue (/proc/loadavg counts the
    whole machine's runnable tasks, ours included) less `own_running_threads`; 0 where it cannot be read."""
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, running - own_running_threads())


def choose(setting: int | str, work: float | None = None, concurrency: int = 1) -> tuple[int, str]:
    """(threads, why) by the module's rule; `work` = samples × parameters of a step (None: not known yet)."""
    if setting != "auto":
        return int(setting), "threads setting"
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) >= 1:
        return int(env), "OMP_NUM_THREADS"
    if work is not None and work < SMALL_WORK:
        return 1, "small model"
    cores = cores_available()
    share = max(1, cores // max(1, concurrency))
    busy = busy_elsewhere() if cores == os.cpu_count() else 0  # the run queue counts every core of the machine
    return max(1, min(share, cores - busy)), f"auto: {cores} cores, {concurrency} concurrent job(s), {busy} busy"


_managed: dict = {}  # set by `apply`: this process's threads are repcost's to choose (a CLI or launcher job)


def apply(setting: int | str, concurrency: int = 1, work: float | None = None) -> tuple[int, str]:
    """Set torch's intra-op threads by `choose` (unless OMP_NUM_THREADS governs); returns (threads, why)."""
    _managed.update(setting=setting, concurrency=concurrency)
    n, why = choose(setting, work, concurrency)
    if why != "OMP_NUM_THREADS" and torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n, why


def fit_to_model(n_samples: int, n_params: int) -> tuple[int, str] | None:
    """Once a run's model is built: re-apply `threads=auto` knowing its size (the small-model rule).

    Only where `apply` ran in this process (a `repcost-train` job): a notebook's or a test's own
    torch setting is left alone. `n_params` counts every stacked member. None where nothing changed.
    """
    if _managed.get("setting") != "auto":
        return None
    return apply("auto", _managed["concurrency"], float(n_samples) * float(n_params))
