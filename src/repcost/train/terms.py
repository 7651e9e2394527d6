"""How the engine evaluates its members (`Terms`): one model as it is (K = 1), or K models stacked.

Stacking (docs/ARCHITECTURE.md, "Ensembles: stacked members"): `torch.func.stack_module_state` turns K models
into one tensor per parameter with a leading member axis; the objective is evaluated for all
members at once with `torch.func.vmap(functional_call(...))` on the family's own `forward` and
`param_sq_norm`. Each member's model keeps parameters that are views into the stacked tensors,
so per-member code (stop rules, evaluation, state dicts) reads it as an ordinary model. The
summed objective Σ_i obj_i has ∂/∂θ_i = ∂obj_i/∂θ_i, so one backward gives every member its own
gradient; SGD (with momentum) and Adam act elementwise, so one optimiser over the stacked
tensors equals K separate ones.

When all members see the same rows (full-batch phases), a 2-D matmul of the shared input by a
per-member weight is done as one GEMM over all members ((N, d) @ (d, K·m)), forward and
backward, instead of the K-fold broadcast `bmm` that plain `vmap` produces (`shared_matmul`,
applied by a TorchFunctionMode to `@`/matmul/mm/F.linear of 2-D operands during the stacked
forward; einsum, as in the `parallel` family, keeps vmap's own rule). F.linear of two per-member
operands becomes addmm there too, whose batching rule has a cheaper backward than F.linear's.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence

import torch
from torch import nn
from torch._C._functorch import _add_batch_dim, _unwrap_batched, is_batchedtensor, maybe_get_level  # vmap's wrappers
from torch.func import functional_call, stack_module_state, vmap
from torch.overrides import TorchFunctionMode

from ..models.base import RepModel
from ..objective import data_loss


def functional_terms(template: nn.Module, loss: str, stacked: bool, state: dict, x: torch.Tensor, y: torch.Tensor,
                     idx: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(K,) data losses and Σ‖p‖² of the parameters in `state` (stacked: a leading member axis) through
    `template`'s code; what `train.step` compiles (plain vmap: the compiler fuses the matmuls itself)."""
    def one(st, xb, yb):
        out, sq = functional_call(template, st, (xb,))
        return data_loss(out, yb, loss), sq

    if idx is not None:
        x, y = (x[idx], y[idx]) if stacked else (x[idx[0]], y[idx[0]])
    if not stacked:
        dl, sq = one(state, x, y)
        return dl[None], sq[None]
    d = None if idx is None else 0
    return vmap(one, in_dims=(0, d, d))(state, x, y)


class _Terms(nn.Module):
    """Wraps a model so that one functional call returns (f(x), Σ‖p‖²) with the family's own code."""

    def __init__(self, model: RepModel):
        super().__init__()
        self.m = model

    def forward(self, x: torch.Tensor):
        return self.m(x), self.m.param_sq_norm()


class Terms:
    """The engine's models as one set of tensors: K = 1, the model itself, its parameters stepped in place; K > 1
    (of one family and shape, `identity.check_stackable`), one stacked model whose slices the models' tensors
    become views of."""

    def __init__(self, models: Sequence[RepModel], loss: str):
        self.models, self.loss = list(models), loss
        self.stacked = len(self.models) > 1
        if self.stacked:
            params, buffers = stack_module_state(self.models)
            for i, m in enumerate(self.models):  # member i's tensors become views of slice i of the stack
                for k, v in params.items():
                    m.get_parameter(k).data = v.detach()[i]
                for k, v in buffers.items():
                    m.get_buffer(k).data = v.detach()[i]
        else:
            params, buffers = dict(self.models[0].named_parameters()), dict(self.models[0].named_buffers())
        self.state = {f"m.{k}": v for k, v in {**params, **buffers}.items()}
        self.params = [v for v in params.values() if v.requires_grad]  # = a single run's parameter order

    @functools.cached_property
    def template(self) -> nn.Module:
        """The functional template (its own values unused): a separate copy, as compiled code must not alias a
        run's tensors."""
        return _Terms(copy.deepcopy(self.models[0]))

    def __call__(self, x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor | None):
        if not self.stacked:
            model = self.models[0]
            if idx is not None:
                x, y = x[idx[0]], y[idx[0]]
            return data_loss(model(x), y, self.loss)[None], model.param_sq_norm()[None]
        with _ShareMatmuls():
            return functional_terms(self.template, self.loss, True, self.state, x, y, idx)


def shared_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b inside vmap, for a shared 2-D a (N, d) and a per-member 2-D b (d, m): one GEMM over all members.

    vmap's own rule for matmul(shared (N, d), per-member (K, d, m)) expands the shared operand to
    (K, N, d) and calls bmm, forward and backward. Here the per-member operand is unwrapped to its
    stacked tensor, the product is one GEMM (N, d) @ (d, K·m), and the result is wrapped back;
    autograd records plain ops on the stacked tensors, so the weight gradient Xᵀ·G is one GEMM too.
    The result is laid out per member (contiguous (K, N, m)): elementwise kernels on the strided
    (N, K, m) layout, ReLU's backward above all, run ~30x slower than the copy costs. `_ShareMatmuls` gives any
    other pair of operands vmap's own rule.
    """
    level = maybe_get_level(b)
    bv, bd = _unwrap_batched(b, level)
    bv = bv.movedim(bd, 0)
    k, d, m = bv.shape
    out = a @ bv.permute(1, 0, 2).reshape(d, k * m)
    return _add_batch_dim(out.reshape(a.shape[0], k, m).movedim(1, 0).contiguous(), 0, level)


_MATMULS = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm}


class _ShareMatmuls(TorchFunctionMode):
    """Routes 2-D × 2-D matmuls (and F.linear) of a shared input by a per-member weight to `shared_matmul`, and
    any other F.linear of 2-D operands to addmm."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        a, b = (*args, None, None)[:2]
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == 2 and b.dim() == 2):
            return func(*args, **kwargs)
        shared_input = not is_batchedtensor(a) and is_batchedtensor(b)
        if func in _MATMULS and len(args) == 2 and not kwargs and shared_input:
            return shared_matmul(a, b)
        if func is torch.nn.functional.linear:
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if shared_input:
                out = shared_matmul(a, b.mT)
                return out if bias is None else out + bias
            # vmap's rule for F.linear of two per-member operands has a slow backward (~3x addmm's
            # under vmap at the papers' widths); addmm is the same arithmetic as a single run's F.linear
            return a @ b.mT if bias is None else torch.addmm(bias, a, b.mT)
        return func(*args, **kwargs)
