"""Small array helpers shared by the analysis functions (all analysis numerics are float64 numpy)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch


def as_f64(x: Any) -> np.ndarray:
    """Return ``x`` (numpy array, torch tensor, list or scalar) as a float64 numpy array."""
    if isinstance(x, torch.Tensor):
        return np.asarray(x.detach().cpu().double())
    return np.asarray(x, dtype=np.float64)


def as_vector(x: Any, name: str = "a") -> np.ndarray:
    """Return ``x`` as a 1-D float64 array, accepting (K,), (1, K) or (K, 1) inputs."""
    v = as_f64(x)
    if v.ndim > 2 or (v.ndim == 2 and 1 not in v.shape):
        raise ValueError(f"{name} must be a vector (scalar-output network), got shape {v.shape}")
    return v.reshape(-1)


def as_matrix(x: Any, name: str = "W") -> np.ndarray:
    """Return ``x`` as a 2-D float64 array (a 1-D input is read as a single column)."""
    m = as_f64(x)
    if m.ndim not in (1, 2):
        raise ValueError(f"{name} must be a matrix, got shape {m.shape}")
    return m.reshape(-1, 1) if m.ndim == 1 else m


def sq_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(M, N) squared Euclidean distances between the rows of a (M, d) and of b (N, d)."""
    return np.maximum((a * a).sum(1)[:, None] - 2 * a @ b.T + (b * b).sum(1)[None, :], 0.0)


def as_units(W: Any, a: Any) -> tuple[np.ndarray, np.ndarray]:
    """(W, a) of a two-layer representation as float64: W a K × d matrix (row k = unit k), a its K outer weights."""
    W, a = as_matrix(W, "W"), as_vector(a, "a")
    if W.shape[0] != a.shape[0]:
        raise ValueError(f"W has {W.shape[0]} rows but a has {a.shape[0]} entries")
    return W, a


def apply_model(model: Any, x: Any, chunk: int = 4096) -> np.ndarray:
    """model(x) as float64 numpy, a chunk of rows at a time, in the model's dtype/device (float64 on the CPU for a
    plain callable), without gradients."""
    p = next(iter(model.parameters()), None) if isinstance(model, torch.nn.Module) else None
    dtype, device = (p.dtype, p.device) if p is not None else (torch.float64, torch.device("cpu"))
    x = as_f64(x)
    with torch.no_grad():
        return np.concatenate([as_f64(model(torch.as_tensor(x[i:i + chunk], dtype=dtype, device=device)))
                               for i in range(0, len(x), chunk)])


def float64_model(model: Any) -> Any:
    """The model itself if all its floating tensors are float64, else a float64 deep copy (analysis numerics run
    in float64 whatever the training dtype; the caller's model is never modified)."""
    tensors = list(model.parameters()) + list(model.buffers())
    if all(t.dtype == torch.float64 for t in tensors if t.is_floating_point()):
        return model
    return copy.deepcopy(model).to(torch.float64)


def float64_rows(model: Any, x: Any) -> torch.Tensor:
    """The rows of x (array or tensor; a vector is one column) as a float64 tensor on the model's device."""
    p = next(iter(model.parameters()), None)
    t = x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(as_f64(x))
    t = t.to(device=p.device if p is not None else t.device, dtype=torch.float64)
    if t.ndim == 1:
        t = t.unsqueeze(-1)
    if t.ndim != 2:
        raise ValueError(f"x must be an (N, d_in) array of samples as rows, got shape {tuple(t.shape)}")
    return t


def float64_inputs(model: Any, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (and y, unless class labels) as float64 on the model's device."""
    xd = float64_rows(model, x)
    return xd, (y.to(device=xd.device, dtype=torch.float64) if y.is_floating_point() else y.to(xd.device))
