"""Input-output Jacobians of a network, their spectra and the Schatten bound (Jacot 2023 Fig 1C, Prop 3).

Jacobians are computed with torch.func (vmap of jacrev or jacfwd) through
`torch.func.functional_call` on float64 copies of the parameters, a chunk of sample points at
a time to bound memory. The caller's model is never modified: functional_call only swaps the
float64 tensors in for the duration of the call and restores the originals.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np
import torch
from torch.func import functional_call, jacfwd, jacrev, vmap

from .arrays import as_f64, float64_rows
from .spectra import singular_values

MEMORY_BUDGET_BYTES = 1 << 30  # default chunk keeps the transient working set under ~1 GB


def _default_chunk(model, d_in: int, d_out: int) -> int:
    """Points per chunk so that the batched Jacobian's working set stays under MEMORY_BUDGET_BYTES.

    Per point, the vmapped jac{fwd,rev} keeps every layer's activation for each of the
    min(d_in, d_out) basis vectors (plus the primal), with a safety factor 4 for tangents,
    masks and temporaries, plus the d_out × d_in result.
    """
    # the output sizes of its matrices, (out) or (k, out) for stacked sub-networks, bound the activations kept per
    # basis vector (any nn.Module)
    units = d_in + sum(int(np.prod(p.shape[:-1])) for p in model.parameters() if p.dim() >= 2)
    basis = min(d_in, d_out) + 1
    per_point = 8 * (4 * basis * units + 2 * d_in * d_out)
    return max(1, MEMORY_BUDGET_BYTES // per_point)


def _jacobians(model, x: Any, chunk_size: Optional[int]) -> torch.Tensor:
    """(N, d_out, d_in) float64 Jacobians at the rows of x, vmapped a chunk of rows at a time."""
    X = float64_rows(model, x)
    params = {n: p.detach().to(torch.float64) for n, p in model.named_parameters()}
    buffers = {n: (b.detach().to(torch.float64) if b.is_floating_point() else b)
               for n, b in model.named_buffers()}

    def f(xi: torch.Tensor) -> torch.Tensor:  # one sample (d_in,) -> (d_out,)
        return functional_call(model, (params, buffers), (xi.unsqueeze(0),)).reshape(-1)

    d_in = X.shape[1]
    with torch.no_grad():
        d_out = int(f(X[0]).numel())
    jac = jacfwd(f) if d_in < d_out else jacrev(f)  # d_in JVPs or d_out VJPs, the fewer
    with warnings.catch_warnings():
        # torch's forward-mode AD loads its JVP decompositions through torch.jit.script, which
        # warns about its own deprecation; that is torch-internal and not actionable here.
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.* is deprecated", category=DeprecationWarning)
        J = vmap(jac, chunk_size=chunk_size or _default_chunk(model, d_in, d_out))(X)
    return J.reshape(-1, d_out, d_in)


def jacobians(model, x: Any, chunk_size: Optional[int] = None) -> np.ndarray:
    """(N, d_out, d_in) float64 Jacobians J f(x_i) of the network function at the rows of x (Jacot 2023 §3, Def 1, Fig 1C)."""
    return _jacobians(model, x, chunk_size).cpu().numpy()


def jacobian_spectra(model, x: Any, chunk_size: Optional[int] = None) -> np.ndarray:
    """(N, min(d_in, d_out)) singular values of J f(x_i), descending, float64 (Jacot 2023 Fig 1C)."""
    return singular_values(_jacobians(model, x, chunk_size))


def schatten_cost(s: Any, L: int, rel_tol: float = 1e-12):
    """‖J‖_{2/L}^{2/L} = Σ_k s_k^{2/L} per point (last axis), ≤ R(f)/L ≤ (1/L)Σ_ℓ‖W_ℓ‖²_F (Jacot 2023 Prop 3).

    The sum runs up to Rank J(x): singular values ≤ rel_tol · s_1 (float64 round-off of an exactly
    rank-deficient Jacobian) are left out, since s^{2/L} of a 1e-16 is not small for large L
    (1e-16^{0.2} ≈ 6e-4). rel_tol = 0 sums every strictly positive value.
    """
    if L < 1:
        raise ValueError(f"L must be a positive integer, got {L}")
    s = np.abs(as_f64(s))
    top = s.max(axis=-1, keepdims=True, initial=0.0)
    keep = (s > rel_tol * top) & (s > 0)
    c = np.sum(np.where(keep, s, 0.0) ** (2.0 / L), axis=-1)
    return float(c) if np.ndim(c) == 0 else c


def prop3_bound(model) -> float:
    """(1/L) Σ_ℓ ‖W_ℓ‖²_F over the weight matrices only, the Jacot 2023 Prop 3 bound on Σ_k s_k(J f(x))^{2/L}.

    The proof (App. B, Prop 7) writes J f(x) = W_L D_{L−1}(x) W_{L−1} ⋯ D_1(x) W_1 with |D_ℓ| ≤ 1
    for σ_a, a ∈ (−1, 1), so biases never enter: the bound holds with or without biases and is
    tighter than (1/L)‖θ‖². It also holds for linear_relu (identity activations) and parallel
    (a block-diagonal FC net), with L = model.depth.
    """
    total = sum(float(np.sum(as_f64(W) ** 2)) for W in model.weight_matrices())
    return total / int(model.depth)

