"""The optimisers of the engine: gd/sgd (with momentum) and Adam, one learning rate per member, and the learning-rate
schedules.

One implementation serves every run: a single model's parameters (K = 1), K stacked members
(leading member axis, `terms.Terms`), eager, compiled (`torch.compile`) or replayed from a
CUDA graph (`train.step`). `torch.optim` cannot do the stacked case: its learning rate is one
number per parameter group, and a stacked grid's members differ in lr. The update is written as
separate elementwise ops (no fused addcdiv/alpha), so member i of a stack gets bitwise the
arithmetic of its single run. The formulas are torch.optim's (SGD: buf ← μ·buf + g, p ← p − lr·buf;
Adam: Kingma & Ba 2015, Algorithm 1, with torch's ε placement), and `member_state_dict()` has
torch.optim's layout, so checkpoints written by either resume with either.

The learning rate and the Adam step count live in tensors on the parameters' device, and a
frozen member (one that already stopped) is masked, not restored: nothing in `step` needs the
host, so it can be captured in a CUDA graph.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

ADAM_BETAS = (0.9, 0.999)  # torch.optim.Adam's defaults, which every phase has used
ADAM_EPS = 1e-8
# torch.optim's names of `bufs`, in order
STATE_KEYS = {"adam": ("exp_avg", "exp_avg_sq"), "sgd": ("momentum_buffer",), "gd": ("momentum_buffer",)}


def lr_factor(schedule: str, final_ratio: float, step: int, steps: int) -> float:
    """lr at `step` of a phase of `steps` steps over the phase's lr: 1 (constant), or decaying to final_ratio.

    A pure function of the step, so resuming is exact. Every schedule is lr × a factor that does not depend on lr, so
    members of a stacked grid that differ in lr share it (`Engine` multiplies each member's lr by it in float64).
    """
    if schedule == "constant" or steps <= 1:
        return 1.0
    t = min(step / (steps - 1), 1.0)
    if schedule == "cosine":
        return final_ratio + (1 - final_ratio) * 0.5 * (1 + math.cos(math.pi * t))
    if schedule == "linear":
        return 1 - (1 - final_ratio) * t
    return final_ratio**t  # exponential


def _per_member(v: torch.Tensor, p: torch.Tensor, stacked: bool) -> torch.Tensor:
    """v (K,) shaped to broadcast over p: along p's leading member axis, or as a scalar for K = 1."""
    if stacked:
        return v.reshape(v.shape[0], *([1] * (p.dim() - 1)))
    return v.reshape([1] * p.dim())


class Optimizer:
    """gd/sgd/adam over `params` (stacked tensors with a leading axis of K members, or one model's).

    `lr` (K,) and `active` (K,) are tensors the caller fills before `step()`; `step()` reads the
    gradients in `p.grad` and changes nothing of an inactive member.
    """

    def __init__(self, name: str, params: Sequence[torch.Tensor], momentum: float = 0.0, K: int = 1):
        self.name, self.params, self.momentum, self.K, self.stacked = name, list(params), momentum, K, K > 1
        p0 = self.params[0]
        self.lr = torch.zeros(K, dtype=torch.float64, device=p0.device)
        self.active = torch.ones(K, dtype=torch.bool, device=p0.device)
        self.steps_taken = torch.zeros(1, dtype=torch.float64, device=p0.device)  # Adam's t (shape (1,): torch.compile loses in-place updates of a 0-dim CPU tensor)
        n_bufs = len(STATE_KEYS[name]) if name == "adam" or momentum else 0  # plain gd keeps no state
        self.bufs = [[torch.zeros_like(p) for p in self.params] for _ in range(n_bufs)]

    # -- the update ---------------------------------------------------------------------------------
    @torch.no_grad()
    def step(self, update=None) -> None:
        """One update of every parameter from its `.grad` (every member's lr from `self.lr`) by `update_` (or
        `update`, its compiled form)."""
        (update or update_)(self.name, self.params, [p.grad for p in self.params], self.bufs, self.steps_taken,
                            self.lr, self.active, self.momentum, self.stacked)

    @torch.no_grad()
    def flush_subnormals(self) -> None:
        """Set the active members' parameter and moment entries below the smallest normal float to 0.

        Weight decay drives the weights of dead units (and, in Adam's ε-regime, their moments)
        geometrically to 0; on the way they pass through the subnormal floats, on which x86 CPUs
        compute 10-100x slower (the Jacot 2023 Fig 1 net: a forward of 3 ms became 85 ms late in
        its cosine phase). Their contribution to any output is below 1e-38, so zero is the same
        function. Frozen members are left as they stopped.
        """
        tiny = torch.finfo(self.params[0].dtype).tiny
        for t in [*self.params, *(b for bufs in self.bufs for b in bufs)]:
            small = t.abs() < tiny
            if self.stacked:
                small &= _per_member(self.active, t, True)
            t.masked_fill_(small, 0.0)

    # -- torch.optim-format state --------------------------------------------------------------------
    def member_state_dict(self, i: int) -> dict:
        """Member i's state as its single run's torch.optim state dict (copies out of a stack; K = 1: i = 0)."""
        group = {"lr": float(self.lr[i]), "params": list(range(len(self.params)))}
        if self.name == "adam":
            group.update(betas=ADAM_BETAS, eps=ADAM_EPS, weight_decay=0, amsgrad=False)
        else:
            group.update(momentum=self.momentum, dampening=0, weight_decay=0, nesterov=False)
        state = {}
        if self.bufs and float(self.steps_taken) > 0:  # torch.optim keeps no state for plain gd
            step = {"step": torch.tensor(float(self.steps_taken))} if self.name == "adam" else {}
            for j in range(len(self.params)):
                state[j] = {**step, **{k: (b[j][i] if self.stacked else b[j]).clone()
                                       for k, b in zip(STATE_KEYS[self.name], self.bufs)}}
        return {"state": state, "param_groups": [group]}

    @torch.no_grad()
    def load_member_state_dict(self, i: int, sd: dict) -> None:
        """Restore member i from its single run's optimiser state dict (or a torch.optim one)."""
        state = sd.get("state", {})
        for j, s in state.items():
            for k, b in zip(STATE_KEYS[self.name], self.bufs):
                if s.get(k) is not None:
                    (b[int(j)][i] if self.stacked else b[int(j)]).copy_(s[k])
            self.steps_taken.fill_(float(s.get("step", 1.0)))  # Adam's t; for sgd: a momentum buffer exists, it is used


def update_(name: str, params: list[torch.Tensor], grads: list[torch.Tensor], bufs: list[list[torch.Tensor]],
            steps_taken: torch.Tensor, lr: torch.Tensor, active: torch.Tensor, momentum: float, stacked: bool) -> None:
    """The in-place update of `Optimizer.step` as a free function (what `train.step` compiles)."""
    steps_taken.add_(1.0)
    if name == "adam":
        b1, b2 = ADAM_BETAS
        bc1 = 1.0 - torch.pow(b1, steps_taken)
        bc2_sqrt = torch.sqrt(1.0 - torch.pow(b2, steps_taken))
        step_size = lr / bc1
    for j, (p, g) in enumerate(zip(params, grads)):
        if name == "adam":
            m, v = bufs[0][j], bufs[1][j]
            m.mul_(b1).add_(g * (1 - b1))
            v.mul_(b2).add_(g * g * (1 - b2))
            denom = torch.sqrt(v) / bc2_sqrt.to(p.dtype) + ADAM_EPS
            d = _per_member(step_size, p, stacked).to(p.dtype) * (m / denom)
        else:
            if momentum:
                bufs[0][j].mul_(momentum).add_(g)
                g = bufs[0][j]
            d = _per_member(lr, p, stacked).to(p.dtype) * g
        if stacked:  # a frozen member subtracts an exact 0 (even where its d is NaN): p stays bitwise p
            d = torch.where(_per_member(active, p, True), d, 0.0)
        p.sub_(d)
