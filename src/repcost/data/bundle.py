"""The one data type every dataset returns, the checks every dataset config shares, the sampled-function bundle, and
the seeded random streams and arc lengths the synthetic datasets draw with."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Optional

import numpy as np
import torch

from ..errors import check

def rng(seed: int, stream: int) -> np.random.Generator:
    """An independent numpy generator for (seed, stream): e.g. stream 0 = train inputs, 1 = test."""
    return np.random.default_rng([seed, stream])


def gaussian(gen: np.random.Generator, *shape: int) -> torch.Tensor:
    """A float64 tensor of i.i.d. N(0, 1) entries drawn from `gen`."""
    return torch.from_numpy(gen.standard_normal(shape))


def spaced(spacing: str, lo: float, hi: float, n: int, gen: np.random.Generator) -> np.ndarray:
    """n points of [lo, hi]: evenly spaced ("even"), or sorted uniform draws from `gen` ("random")."""
    return np.linspace(lo, hi, n) if spacing == "even" else np.sort(gen.uniform(lo, hi, size=n))


def arclength(points: np.ndarray) -> np.ndarray:
    """Cumulative arc length along the polyline through the rows of points (0 at the first)."""
    return np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))])


def points_at_arclength(curve: Callable, u: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Points curve(t) at arc-length fractions u ∈ [0, 1] along the polyline through curve(grid) (sorted grid; t is
    interpolated, the points are exact): uniform u is uniform along the curve."""
    s = arclength(curve(grid))
    return curve(np.interp(u * s[-1], s, grid))


# config keys many datasets share -> (smallest allowed value, what is allowed)
SHARED_KEYS = {"seed": (0, "an integer >= 0"), "teacher_seed": (0, "an integer >= 0"),
               "n_train": (1, "an integer >= 1"), "n_test": (0, "an integer >= 0"), "noise": (0, "a noise std >= 0"),
               "beta": (0, "a bias amount >= 0")}


def check_shared(cfg) -> None:
    """The checks of the SHARED_KEYS that a dataset config has (seeds, split sizes, noise std, bias amount)."""
    for key, (least, allowed) in SHARED_KEYS.items():
        if hasattr(cfg, key):
            check(getattr(cfg, key) >= least, key, getattr(cfg, key), allowed)


@dataclass
class DataBundle:
    """Train (and optional test) split of a dataset; samples are rows.

    Inputs are float64 (N, d_in). Regression targets are float64 (N, d_out); classification
    targets are int64 class indices (N,). The trainer casts to the run's dtype and device.
    """

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: Optional[torch.Tensor] = None
    y_test: Optional[torch.Tensor] = None
    task: str = "regression"  # or "classification"
    n_classes: int = 0
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.task not in ("regression", "classification"):
            raise ValueError(f"task must be regression or classification, got {self.task}")
        if self.x_train.ndim != 2:
            raise ValueError(f"x_train must be (N, d), got shape {tuple(self.x_train.shape)}")
        if self.task == "regression" and self.y_train.ndim != 2:
            raise ValueError(f"regression y_train must be (N, k), got {tuple(self.y_train.shape)}")

    @property
    def d_in(self) -> int:
        """Input dimension."""
        return self.x_train.shape[1]

    @property
    def d_out(self) -> int:
        """Network output dimension: target dimension, or number of classes."""
        return self.n_classes if self.task == "classification" else self.y_train.shape[1]

    def to(self, dtype: torch.dtype, device) -> "DataBundle":
        """The same bundle with inputs (and regression targets) cast to dtype on device."""
        labels = self.task == "classification"  # class indices keep their integer dtype

        def cast(t, is_y=False):
            return None if t is None else t.to(device=device) if is_y and labels else t.to(dtype=dtype, device=device)

        return replace(self, x_train=cast(self.x_train), y_train=cast(self.y_train, True), x_test=cast(self.x_test),
                       y_test=cast(self.y_test, True), meta=dict(self.meta))


def function_bundle(name: str, cfg, f: Callable, draw: Callable, n_train: int, meta: dict) -> DataBundle:
    """Regression on a known function: train inputs draw(n_train, stream 0), test inputs draw(cfg.n_test, 1) when
    cfg.n_test > 0, targets f(x); the train targets get N(0, cfg.noise²) (stream 2), the test targets stay clean."""
    x_train, y_train, x_test, y_test = two_splits(lambda n, stream: (x := draw(n, stream), f(x)), n_train, cfg.n_test)
    if getattr(cfg, "noise", 0) > 0:
        y_train = y_train + cfg.noise * gaussian(rng(cfg.seed, 2), *y_train.shape)
    return DataBundle(name, x_train, y_train, x_test, y_test, meta=meta)


def two_splits(split: Callable, n_train: int, n_test: int) -> tuple:
    """(x_train, y_train, x_test, y_test) from split(n, stream): train on stream 0, test on stream 1 when n_test > 0."""
    return (*split(n_train, 0), *(split(n_test, 1) if n_test > 0 else (None, None)))
