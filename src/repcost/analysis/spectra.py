"""Singular-value spectra and rank measures of hidden representations, weights and input-output Jacobians, and the
Schatten bound on the Jacobians (Jacot 2023 Fig 1A and 1C, Prop 3).

All numerics are float64 whatever the model's dtype. Samples are rows: a layer's representation
of a batch is the (N × n_ℓ) matrix Z_ℓᵀ of Jacot 2023 (who stacks samples as columns, Z_ℓ is
n_ℓ × N); the singular values are the same either way.

The rank measures accept one spectrum (shape (r,), returning a Python scalar) or a batch of
spectra (shape (..., r), returning an array over the leading axes); singular values need not
be sorted.

Jacobians are computed with torch.func (vmap of jacrev or jacfwd) on the model in float64 (a
float64 copy where it is not), a chunk of sample points at a time to bound memory. The caller's
model is never modified.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np
import torch
from torch.func import jacfwd, jacrev, vmap

from .arrays import as_f64, float64_model, float64_rows

DEFAULT_REL_TOL = 1e-3  # numerical rank: count s_i > rel_tol · s_1


def _scalar_or_array(v: np.ndarray, kind=float):
    """A 0-d result as a Python scalar (int or float), otherwise the array."""
    return kind(v) if np.ndim(v) == 0 else v


def singular_values(A: Any) -> np.ndarray:
    """Singular values of A (…, m, n) in float64, descending (Jacot 2023 Fig 1: spectra of representations and Jacobians)."""
    # LAPACK through numpy: torch's batched CPU svdvals is ~100x slower for many small
    # matrices (24 s vs 0.15 s for 500 × 50 × 50 in float64 with torch 2.13).
    return np.linalg.svd(as_f64(A), compute_uv=False)


def normalised(s: Any) -> np.ndarray:
    """s / s_1 with s_1 = max_i s_i, zeros where s_1 = 0 (Jacot 2023 Fig 1A plots s_i/s_1)."""
    s = as_f64(s)
    top = s.max(axis=-1, keepdims=True, initial=0.0)
    return np.where(top > 0, s / np.where(top > 0, top, 1.0), 0.0)


def numerical_rank(s: Any, rel_tol: float = DEFAULT_REL_TOL):
    """Number of s_i > rel_tol · s_1 (0 for an all-zero spectrum): the approximate rank read off Jacot 2023 Fig 1A/C."""
    s = as_f64(s)
    top = s.max(axis=-1, keepdims=True, initial=0.0)  # an all-zero spectrum has no s_i > 0
    return _scalar_or_array(np.sum(s > rel_tol * top, axis=-1, dtype=np.int64), int)


def stable_rank(s: Any):
    """Stable rank Σ s_i² / s_1² (0 for an all-zero spectrum); a continuous proxy for the rank in Jacot 2023 §4."""
    s = as_f64(s)
    top = s.max(axis=-1, initial=0.0)
    r = np.where(top > 0, np.sum(s**2, axis=-1) / np.where(top > 0, top, 1.0) ** 2, 0.0)
    return _scalar_or_array(r)


def entropy_rank(s: Any):
    """Effective rank exp(−Σ p_i log p_i), p_i = s_i / Σ s_j (Roy & Vetterli 2007; 0 for an all-zero spectrum), used alongside Jacot 2023 Fig 1."""
    s = np.abs(as_f64(s))
    tot = s.sum(axis=-1, keepdims=True)
    p = s / np.where(tot > 0, tot, 1.0)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    r = np.where(tot[..., 0] > 0, np.exp(-plogp.sum(axis=-1)), 0.0)
    return _scalar_or_array(r)


def gap_rank(s: Any, max_rank: int = 10) -> tuple[int, float]:
    """(r, s_{r+1}/s_r) at the largest relative drop among s_1 … s_{max_rank+1}: the rank a plot like Jacot 2023 Fig 1A shows."""
    s = np.sort(as_f64(s))[::-1][: max_rank + 1]
    if s.size < 2 or s[0] <= 0:
        return int(s.size and s[0] > 0), float("nan")
    drops = np.where(s[:-1] > 0, s[1:] / np.where(s[:-1] > 0, s[:-1], 1.0), np.inf)
    r = int(np.argmin(drops))
    return r + 1, float(drops[r])


def rank_measures(s: Any, rel_tol: float = DEFAULT_REL_TOL) -> dict:
    """{'numerical_rank', 'stable_rank', 'entropy_rank'} of one spectrum or a batch of them (Jacot 2023 Fig 1)."""
    return {"numerical_rank": numerical_rank(s, rel_tol), "stable_rank": stable_rank(s),
            "entropy_rank": entropy_rank(s)}


# ---------------------------------------------------------------------------------------------
# Model-level spectra


def _spectrum(A: Any, rel_tol: float, **labels) -> dict:
    """{**labels, 's1', rank measures, 's'} of one matrix, or of a stack of them (s of shape (k, r), measures over k);
    every key but 's' is a column of analysis/layers.csv, in its order."""
    s = singular_values(A)
    return {**labels, "s1": _scalar_or_array(s.max(axis=-1, initial=0.0)), **rank_measures(s, rel_tol), "s": s}


def _layer_spectrum(Z: torch.Tensor, layer: int, which: str, centred: bool, rel_tol: float) -> dict:
    Z = Z.detach().to(torch.float64)
    if centred:  # Z_ℓ − m_ℓ 1_Nᵀ in Jacot's column convention: subtract the mean over samples
        Z = Z - Z.mean(dim=0, keepdim=True)
    return _spectrum(Z, rel_tol, layer=layer, which=which, width=int(Z.shape[1]), centred=centred)


def hidden_spectra(model, x: Any, centred: bool = True, which: str = "post",
                   rel_tol: float = DEFAULT_REL_TOL) -> list[dict]:
    """Singular values and ranks of each hidden layer's (centred) N × n_ℓ representation (Jacot 2023 Fig 1A).

    One dict per hidden layer (ℓ = 1 … L−1, in `model.hidden` order): `layer` ℓ, `which` 'pre' (α̃_ℓ) or 'post'
    (α_ℓ = σ(α̃_ℓ)), `width` n_ℓ, `centred`, `s1`, the rank measures and the singular values `s`; with
    which="both", two per layer, 'pre' then 'post'. For `parallel` a hidden layer is all k sub-networks' units side by side
    (k·n_ℓ columns).
    """
    if which not in ("pre", "post", "both"):
        raise ValueError(f"which must be 'pre', 'post' or 'both', got {which!r}")
    kinds = ("pre", "post") if which == "both" else (which,)
    m = float64_model(model)
    with torch.no_grad():
        hidden = m.hidden(float64_rows(m, x))
    return [_layer_spectrum(getattr(h, k), ell, k, centred, rel_tol) for ell, h in enumerate(hidden, 1) for k in kinds]


def module_spectra(module: torch.nn.Module, x: Any, names: list[str], centred: bool = True,
                   rel_tol: float = DEFAULT_REL_TOL) -> list[dict]:
    """Spectra of the outputs of named submodules of any nn.Module (captured by forward hooks), in `names` order.

    The generic counterpart of `hidden_spectra` for networks that are not repcost models: e.g.
    `module_spectra(net, x, ["1", "3"])` for the activations after `net[1]` and `net[3]` of an
    `nn.Sequential`. Outputs are flattened to (N, features); layer ℓ is the position in `names` (1-based).
    """
    m = float64_model(module)
    subs = dict(m.named_modules())
    missing = [n for n in names if n not in subs]
    if missing:
        raise ValueError(f"no submodule named {missing}; named submodules: {[n for n in subs if n]}")
    seen: dict[str, torch.Tensor] = {}
    handles = [subs[n].register_forward_hook(lambda _mod, _inp, out, n=n: seen.__setitem__(n, out)) for n in names]
    try:
        with torch.no_grad():
            m(float64_rows(m, x))
    finally:
        for h in handles:
            h.remove()
    return [_layer_spectrum(seen[n].reshape(seen[n].shape[0], -1), ell, "post", centred, rel_tol)
            for ell, n in enumerate(names, start=1)]


def weight_spectra(model, rel_tol: float = DEFAULT_REL_TOL) -> list[dict]:
    """Singular values of every weight matrix, plus linear_relu's effective W = W_{L−1}⋯W_1 (Ongie & Willett §3; Jacot 2023 §4).

    One dict per matrix: `layer` (1 … L; 'eff' for the effective matrix), `name` ('W1' … for the layers; for
    linear_relu the last is 'a', for parallel 'alpha'; 'W_eff'), `s1`, the rank measures and `s`. For `parallel` the sub-network layers are stacks (k, out, in): their spectra are (k, r) and
    their rank measures arrays of length k; α (d_out × k) is one matrix. The effective matrix's
    rank measures how aligned linear_relu's ReLU units are (Ongie & Willett §3, Fig 1).
    """
    named = [(ell, name, W) for ell, (name, W) in enumerate(zip(model.weight_names(), model.weight_matrices()), 1)]
    named += [("eff", name, W) for name, W in float64_model(model).derived_matrices().items()]
    return [_spectrum(as_f64(W), rel_tol, layer=ell, name=name) for ell, name, W in named]


# ---------------------------------------------------------------------------------------------
# Input-output Jacobians


def jacobians(model, x: Any, chunk_size: Optional[int] = None) -> np.ndarray:
    """(N, d_out, d_in) float64 Jacobians J f(x_i) of the network function at the rows of x, vmapped a chunk of rows at
    a time (Jacot 2023 §3, Def 1, Fig 1C)."""
    m = float64_model(model)
    X = float64_rows(m, x)

    def f(xi: torch.Tensor) -> torch.Tensor:  # one sample (d_in,) -> (d_out,)
        return m(xi.unsqueeze(0)).reshape(-1)

    d_in = X.shape[1]
    with torch.no_grad():
        d_out = int(f(X[0]).numel())
    jac = jacfwd(f) if d_in < d_out else jacrev(f)  # d_in JVPs or d_out VJPs, the fewer
    if chunk_size is None:  # points per chunk: the vmapped jac{fwd,rev}'s working set under ~1 GB
        # Per point it keeps every layer's activation (of at most the output sizes of the model's matrices, (out) or
        # (k, out) for stacked sub-networks) for each of the min(d_in, d_out) basis vectors plus the primal, with a
        # safety factor 4 for tangents, masks and temporaries, plus the d_out × d_in result.
        units = d_in + sum(int(np.prod(p.shape[:-1])) for p in model.parameters() if p.dim() >= 2)
        chunk_size = max(1, (1 << 30) // (8 * (4 * (min(d_in, d_out) + 1) * units + 2 * d_in * d_out)))
    with warnings.catch_warnings(), torch.no_grad():  # no graph to the parameters: J is the Jacobian in x alone
        # torch's forward-mode AD loads its JVP decompositions through torch.jit.script, which
        # warns about its own deprecation; that is torch-internal and not actionable here.
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.* is deprecated", category=DeprecationWarning)
        J = vmap(jac, chunk_size=chunk_size)(X)
    return J.reshape(-1, d_out, d_in).cpu().numpy()


def jacobian_spectra(model, x: Any, chunk_size: Optional[int] = None) -> np.ndarray:
    """(N, min(d_in, d_out)) singular values of J f(x_i), descending, float64 (Jacot 2023 Fig 1C)."""
    return singular_values(jacobians(model, x, chunk_size))


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

