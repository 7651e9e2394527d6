"""Seeded random streams, random ReLU networks and arc lengths shared by the synthetic datasets."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch


def rng(seed: int, stream: int) -> np.random.Generator:
    """An independent numpy generator for (seed, stream): e.g. stream 0 = train inputs, 1 = test."""
    return np.random.default_rng([seed, stream])


def spaced(spacing: str, lo: float, hi: float, n: int, gen: np.random.Generator) -> np.ndarray:
    """n points of [lo, hi]: evenly spaced ("even"), or sorted uniform draws from `gen` ("random")."""
    return np.linspace(lo, hi, n) if spacing == "even" else np.sort(gen.uniform(lo, hi, size=n))


def arclength(points: np.ndarray) -> np.ndarray:
    """Cumulative arc length along the polyline through the rows of points (0 at the first)."""
    return np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))])


def at_arclength(curve: Callable, u: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Parameters t of curve(t) at arc-length fractions u ∈ [0, 1] along the polyline through curve(grid) (sorted
    grid): uniform u is uniform along the curve."""
    s = arclength(curve(grid))
    return np.interp(np.asarray(u, dtype=np.float64) * s[-1], s, grid)


def gaussian(gen: np.random.Generator, *shape: int) -> torch.Tensor:
    """A float64 tensor of i.i.d. N(0, 1) entries drawn from `gen`."""
    return torch.from_numpy(gen.standard_normal(shape))


def random_relu_net(dims: list, gen: np.random.Generator, beta: float = 0.0) -> list:
    """Random ReLU-net parameters [(W_l, b_l)] for widths dims = (n_0, …, n_L) (Jacot 2022 App. A).

    W_l ~ N(0, gain/n_{l-1}) with gain 1 on the input layer and 2 on layers fed by a ReLU
    (He init, as in models/fc.py), so every pre-activation has variance ≈ 1 on N(0, I) inputs.
    b_l is drawn like one more column of W_l and enters as β·b_l (Jacot 2022 §2); β = 0: no bias.
    """
    params = []
    for i in range(len(dims) - 1):
        std = math.sqrt((1.0 if i == 0 else 2.0) / dims[i])
        w = gaussian(gen, dims[i + 1], dims[i]) * std
        b = gaussian(gen, dims[i + 1]) * std * beta
        params.append((w, b))
    return params


def relu_net_forward(params: list, x: torch.Tensor) -> torch.Tensor:
    """f(x) = W_L σ(… σ(W_1 x + β b_1) …) + β b_L for rows x (N, n_0); σ = ReLU, output linear."""
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w.T + b
        if i < len(params) - 1:
            h = torch.relu(h)
    return h
