"""How many CPU threads torch uses in a run: the `threads` key (`auto`, or an integer >= 1).

The rule (`choose`), in order:

1. `threads=N` (an integer) is used as given.
2. `threads=auto` with `OMP_NUM_THREADS` set in the environment: that value (torch reads it at start-up;
   a user or a cluster script that set it has chosen).
3. `threads=auto` otherwise: the cores this process may use (its CPU affinity, within a cgroup CPU quota),
   shared among the jobs of the launch that run at once (`concurrency`: a parallel or stacked launcher's
   `n_jobs`), less the cores other processes keep busy right now (the run queue, sampled, less this process's
   own runnable threads such as OpenMP workers still spinning; only where the process may use every core of
   the machine, since the run queue counts them all), at least 1.
   A run whose step is small (samples × parameters below `SMALL_WORK` = 1e5) gets 1 thread whatever the
   cores: its largest product is under ~1e5 multiply-adds (tens of µs), too small to split, and extra threads
   only cost synchronisation, which becomes ruinous (tens of ms per step) as soon as another process competes
   for the cores. Above it the free cores decide: Jacot et al. 2022's MNIST net (42 samples × 42k parameters,
   its first layer alone 1.6e6 multiply-adds per pass) gets both cores of an idle 2-core machine and one beside
   a busy process, where a second thread makes its steps several times slower (benchmarks/threads.py).

Threads are applied at run start (`apply`, from the job's validated config; `fit_to_model` once the model's
size is known) and only through this module, so a sweep never overrides an explicit choice; code that
calls repcost as a library (a notebook, a test) keeps its own torch setting. `benchmarks/threads.py`
measures the rule against 1, 2 and all threads.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from .errors import ConfigError

# samples × parameters of one full-batch step below which a run trains on one thread. The demo (10 × 301 = 3e3)
# sits below it; Jacot et al. 2022's MNIST net (42 × 42k = 1.8e6) and Jacot 2023's Fig 1 net (2000 × 91k = 1.8e8)
# above, where the free cores decide (benchmarks/threads.py).
SMALL_WORK = 1e5


def check_threads(value: Any) -> int | str:
    """The `threads` config value, validated: 'auto' or an integer >= 1."""
    if value == "auto":
        return "auto"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise ConfigError("threads", value, "auto or an integer >= 1 (torch CPU threads of the run)")


def cores_available() -> int:
    """CPU cores this process may run on: its affinity mask, within a cgroup v2 CPU quota if one is set."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(float(quota) / float(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def own_running_threads() -> int:
    """Threads of this process that are runnable right now (at least this one): e.g. torch's OpenMP workers,
    which keep spinning for a while after a parallel operation."""
    n = 0
    try:
        for task in Path("/proc/self/task").iterdir():
            try:
                stat = (task / "stat").read_text()
            except OSError:  # the thread ended meanwhile
                continue
            n += stat[stat.rindex(")") + 2:].startswith("R")  # the state follows the parenthesised name
    except (OSError, ValueError):
        return 1
    return max(1, n)


def busy_elsewhere(samples: int = 5, interval: float = 0.01) -> int:
    """Tasks other than this process's threads that are running right now (median of a few reads of the run queue).

    Linux's /proc/loadavg counts runnable tasks, this process's own included (its spinning OpenMP workers too,
    which are not competition); elsewhere 0 (nothing known).
    """
    counts = []
    for i in range(samples):
        try:
            running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return 0
        counts.append(max(0, running - own_running_threads()))
        if i + 1 < samples:
            time.sleep(interval)
    return sorted(counts)[len(counts) // 2]


def free_cores(samples: int = 5) -> int:
    """Cores this process may use less those other tasks keep busy right now (`busy_elsewhere`), at least 0. The
    run queue is the whole machine's: it says something about our cores only when they are all of them."""
    cores = cores_available()
    busy = busy_elsewhere(samples) if cores == (os.cpu_count() or cores) else 0
    return max(0, cores - busy)


def env_threads() -> int | None:
    """OMP_NUM_THREADS as a positive integer, or None when unset or unreadable."""
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return n if n >= 1 else None


def choose(setting: int | str, work: float | None = None, concurrency: int = 1) -> tuple[int, str]:
    """(threads, why) by the module's rule; `work` = samples × parameters of a step (None: not known yet)."""
    if setting != "auto":
        return int(setting), "threads setting"
    env = env_threads()
    if env is not None:
        return env, "OMP_NUM_THREADS"
    if work is not None and work < SMALL_WORK:
        return 1, "small model"
    cores = cores_available()
    share = max(1, cores // max(1, min(concurrency, cores)))
    free = max(1, free_cores())
    n = min(share, free)
    return n, f"auto: {cores} cores, {concurrency} concurrent job(s), {cores - free} busy elsewhere"


_managed: dict = {}  # set by `apply`: this process's threads are repcost's to choose (a CLI or launcher job)


def apply(setting: int | str, work: float | None = None, concurrency: int | None = None) -> tuple[int, str]:
    """Set torch's intra-op threads by `choose` (unless OMP_NUM_THREADS governs); returns (threads, why).

    `concurrency` None: the value of this process's earlier call (1 if none).
    """
    import torch

    concurrency = _managed.get("concurrency", 1) if concurrency is None else concurrency
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
    return apply("auto", float(n_samples) * float(n_params))
