"""One training step: eager, compiled (`torch.compile`), or replayed from a CUDA graph.

docs/ARCHITECTURE.md, "Fast steps". The engine (`engine.Engine`) asks a `Stepper` for two things
per step: `grads(idx)` (the members' objective terms at the current parameters and their
gradients in `p.grad`) and `update()` (the optimiser step, `optim.Optimizer`). Everything the
step reads that changes between steps (the learning rates, the minibatch rows, which members are
still active) lives in tensors that the engine fills in place, so the same work can be

* run eagerly (the default on CPU: no compile time, the plain PyTorch arithmetic);
* compiled: the objective (forward and backward) and the update each become one
  `torch.compile`d function (`train.compile`);
* captured on CUDA: after two warm-up steps on a side stream, `grads` and `update` are each
  captured once per phase in a `torch.cuda.CUDAGraph` and replayed (`train.cuda_graphs`). The
  outputs (objective terms, ‖∇‖², ‖θ‖²) are static tensors that the engine reads only every
  `check_every`/`log_every` steps, so the loop does not wait for the GPU in between.

Compiled functions are shared by every phase and by every run of the process with equal terms
(dynamo's guards: the family, its plain attributes, the tensors' shapes); an optimiser change recompiles
only the update.
"""

from __future__ import annotations

import functools
import logging

import torch

from .optim import Optimizer, update_
from .terms import functional_terms

log = logging.getLogger("repcost")
WARMUP_STEPS = 2  # eager/compiled steps on a side stream before a phase is captured
# train.compile=auto (docs/ARCHITECTURE.md, "Fast steps"): on CUDA a compile (~10 s) pays back once
# a run has a few thousand steps, whatever the net (steps there cost launches, not arithmetic); on
# the CPU it saves about a quarter of the arithmetic-bound step time, so it pays once the run's
# work steps × members × samples × parameters exceeds ~1e12 (minutes of eager training on 2 cores;
# the compile takes ~30 s). Short runs and tests stay eager.
COMPILE_MIN_STEPS_CUDA = 2000
COMPILE_MIN_WORK_CPU = 1e12


@functools.cache
def compile_once(fn):
    """`fn` compiled once per process; dynamo's guards tell apart the families, attributes, shapes and optimisers
    it is called with. Imported here, as importing torch._dynamo costs seconds, which eager runs never pay."""
    import torch._dynamo as dynamo

    # compiled steps of several runs in one process (tests, a stacked launcher) must not hit dynamo's cap
    for key in ("recompile_limit", "cache_size_limit"):  # the name in newer torch, and in older ones
        if hasattr(dynamo.config, key):
            setattr(dynamo.config, key, max(getattr(dynamo.config, key), 64))
    return torch.compile(fn, dynamic=False)


def fast_step_options(cfg, device: torch.device, K: int, n: int, n_params: int) -> dict:
    """{compiled, graphed} for an engine of K members with `n_params` parameters each on n samples: `train.compile`
    on/off or the auto rule above; CUDA graphs on every CUDA run unless `train.cuda_graphs=off`."""
    if cfg.compile != "auto":
        compiled = cfg.compile == "on"
    elif device.type == "cuda":
        compiled = cfg.total_steps >= COMPILE_MIN_STEPS_CUDA
    else:
        compiled = cfg.total_steps * K * n * n_params >= COMPILE_MIN_WORK_CPU
    return {"compiled": compiled, "graphed": device.type == "cuda" and cfg.cuda_graphs != "off"}


def objective_terms(terms, x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor | None, stated_coef: torch.Tensor,
                    trained_coef: torch.Tensor):
    """(K,) stated objective, data loss and Σ‖p‖², and the scalar the phase descends (summed over members).

    The descended objective is dl + trained_coef·sq even where the phase's lam_factor is 1 (then it is
    the stated one, bit for bit), so one compiled function serves every phase.
    """
    dl, sq = terms(x, y, idx)
    return dl + stated_coef * sq, dl, sq, (dl + trained_coef * sq).sum()


def _grad_norms(params: list[torch.Tensor], K: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(K,) ‖∇‖² and ‖θ‖² from p.grad and p (a single model's parameters: K = 1 without a member axis)."""
    g2 = sum((p.grad * p.grad).reshape(K, -1).sum(1) for p in params)
    p2 = sum((p * p).reshape(K, -1).sum(1) for p in params)
    return g2, p2


class Stepper:
    """Runs the engine's steps for one set of terms: eagerly, compiled and/or as CUDA graphs."""

    def __init__(self, terms, x: torch.Tensor, y: torch.Tensor, K: int, compiled: bool = False,
                 graphed: bool = False, want_grad: bool = False):
        self.terms, self.x, self.y, self.K = terms, x, y, K
        self.graphed, self.want_grad = graphed, want_grad
        self._objective, self._update = objective_terms, update_
        if compiled:
            fn = compile_once(objective_terms)  # called with the terms as a function of their state dict
            self._objective = self._first_call("_objective", lambda t, *args: fn(
                functools.partial(functional_terms, t.template, t.loss, t.stacked, t.state), *args))
            self._update = self._first_call("_update", compile_once(update_))

    def _first_call(self, attr: str, fn):
        """`fn`'s first call, after which `fn` itself is `self.<attr>`; a compile that fails (no compiler, a killed
        g++, a backend bug) makes this run eager instead of failing it (nothing was computed yet: the call is
        simply redone)."""
        def call(*args):
            try:
                out = fn(*args)
            except Exception as e:  # noqa: BLE001 - any compiler failure; an eager error re-raises below
                log.warning("torch.compile of the %s failed (%s); this run continues eagerly", attr[1:],
                            str(e).splitlines()[0][:200])
                self._objective, self._update = objective_terms, update_
                return getattr(self, attr)(*args)
            setattr(self, attr, fn)
            return out

        return call

    def start_phase(self, optimizer: Optimizer, stated_coef: torch.Tensor, trained_coef: torch.Tensor,
                    batch_size: int | None) -> None:
        """A new phase: its optimiser, λ coefficients (K,) and minibatch size (None: full batch)."""
        self.optimizer, self.stated_coef, self.trained_coef = optimizer, stated_coef, trained_coef
        self._graphs: tuple[torch.cuda.CUDAGraph, torch.cuda.CUDAGraph] | None = None  # (grads, update) once captured
        self._warm = 0
        self._norms: tuple | None = None
        self._idx = (torch.zeros((self.K, batch_size), dtype=torch.long, device=self.x.device)
                     if batch_size is not None else None)
        if self.graphed:
            self._stream = torch.cuda.Stream(self.x.device)

    # -- the two halves of a step ------------------------------------------------------------------
    def _grads_now(self, idx: torch.Tensor | None):
        for p in self.terms.params:
            p.grad = None
        obj, dl, sq, trained = self._objective(self.terms, self.x, self.y, idx, self.stated_coef, self.trained_coef)
        trained.backward()
        norms = _grad_norms(self.terms.params, self.K) if self.graphed and self.want_grad else None
        return (obj.detach(), dl.detach(), sq.detach()), norms

    def grads(self, idx: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(K,) objective, data loss, Σ‖p‖² at the current parameters; their gradients land in p.grad."""
        if not self.graphed:
            return self._grads_now(idx)[0]
        if idx is not None:  # pinned (cached by torch), so the copy does not wait for the GPU
            self._idx.copy_(idx.pin_memory(), non_blocking=True)
        if self._graphs is None and self._warm >= WARMUP_STEPS:
            self._capture()
        if self._graphs is not None:
            self._graphs[0].replay()
        else:
            self._out, self._norms = self._on_side_stream(lambda: self._grads_now(None if idx is None else self._idx))
        return self._out

    def update(self) -> None:
        """The optimiser step from p.grad."""
        if not self.graphed:
            self.optimizer.step(self._update)
        elif self._graphs is not None:
            self._graphs[1].replay()
        else:
            self._on_side_stream(lambda: self.optimizer.step(self._update))
            self._warm += 1

    def grad_norms(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(K,) ‖∇‖² and ‖θ‖² of the last `grads` call."""
        if self.graphed and self._norms is not None:
            return self._norms
        with torch.no_grad():
            return _grad_norms(self.terms.params, self.K)

    # -- CUDA graphs -------------------------------------------------------------------------------
    def _on_side_stream(self, fn):
        cur = torch.cuda.current_stream(self.x.device)
        self._stream.wait_stream(cur)
        with torch.cuda.stream(self._stream):
            out = fn()
        cur.wait_stream(self._stream)
        return out

    def _capture(self) -> None:
        """Capture this phase's `grads` and `update` (the parameters' and state's addresses stay fixed)."""
        for p in self.terms.params:
            p.grad = None  # allocated inside the graph's pool, so every replay writes the same tensors
        torch.cuda.synchronize(self.x.device)
        self._graphs = (torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph())
        with torch.cuda.graph(self._graphs[0]):
            self._out, self._norms = self._grads_now(self._idx)
        with torch.cuda.graph(self._graphs[1]):
            self.optimizer.step(self._update)
