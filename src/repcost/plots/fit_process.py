"""figures/fit.png drawn by a helper process that loads matplotlib while the run trains.

matplotlib's import (~0.4 s: building every artist's docstring) and the drawing are most of what a 1-D run does
after training. Where it pays (`helper_pays`: repcost-train's own process, a core free), `FitFigures` starts a
helper when training starts: it loads matplotlib on the free core (1-D nets train on one thread), then draws each
figure it is sent while the run computes its final certificate, so the run's end waits at most for the drawing.
Otherwise, or if the helper cannot start or fails, the figure is drawn in this process by the same function.
Requests are JSON lines (exact floats) on the helper's stdin; it answers each with a line once the file is written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from .. import threads
from ..startup import started_torch


def helper_pays() -> bool:
    """Whether a helper would shorten this run: repcost-train's own process (not a notebook, a test or a sweep
    worker), matplotlib not loaded yet, and a core left free by the run's threads and the tasks running elsewhere
    (one read of the run queue, as `threads.choose` reads it). On a full machine the helper's start-up would only
    add to the work."""
    if not started_torch() or "matplotlib.figure" in sys.modules:
        return False
    import torch

    return threads.free_cores(samples=1) - torch.get_num_threads() >= 1


class FitFigures:
    """Draws learned-function figures (`save_learned_function`), in a helper process where it pays."""

    def __init__(self, helper: bool) -> None:
        """`helper`: start the helper process (`helper_pays` says when it does)."""
        self._proc: subprocess.Popen | None = None
        self._pending: list[dict] = []  # requests sent to the helper, not yet answered
        if helper:
            try:  # detached from the terminal: its Ctrl-C is for the run, which then closes the helper
                self._proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                              start_new_session=True)
            except OSError:
                self._proc = None

    def draw(self, path: Path, title: str, **arrays: np.ndarray) -> None:
        """Have the figure of `arrays` (x_grid, f_grid, x, y, spline_grid) drawn to `path`: by the helper, while
        this process goes on until `wait`, or here, before returning."""
        request = {"path": str(path), "title": title, **{k: np.asarray(v).tolist() for k, v in arrays.items()}}
        if self._proc is not None:
            try:
                self._proc.stdin.write(json.dumps(request) + "\n")
                self._proc.stdin.flush()
                self._pending.append(request)
                return
            except OSError:
                self.close()  # the helper failed: this figure and the next are drawn here
        save_learned_function(**request)

    def wait(self) -> None:
        """Return once every figure asked for is written (what the helper failed to draw is drawn here)."""
        pending, self._pending = self._pending, []
        for i, request in enumerate(pending):
            if self._proc is None or self._proc.stdout.readline().strip() != "drawn":
                self.close()
                for r in pending[i:]:
                    save_learned_function(**r)
                return

    def __enter__(self) -> FitFigures:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the helper (it exits at the end of its input); figures not waited for are not waited for."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            proc.stdout.close()


def save_learned_function(path: str, title: str, x_grid: list, f_grid: list, x: list, y: list,
                          spline_grid: list | None = None) -> None:
    """`learned_function_figure` written to `path` (PNG, 110 dpi; its folder made if missing)."""
    from .learned_function import learned_function_figure  # matplotlib

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    a = np.asarray
    fig = learned_function_figure(a(x_grid), a(f_grid), a(x), a(y), title, None if spline_grid is None else a(spline_grid))
    fig.savefig(path, dpi=110)


def _serve() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run decides when the helper ends
    from . import learned_function  # noqa: F401  (matplotlib loads now, before the first request)

    for line in sys.stdin:
        save_learned_function(**json.loads(line))
        print("drawn", flush=True)
    os._exit(0)  # every file is written and closed: no need for the interpreter's teardown (~0.1 s) the run waits on


if __name__ == "__main__":
    _serve()
