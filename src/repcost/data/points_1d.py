"""A handful of 1-D points with targets (Savarese et al. 2019, Figs 1–2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import check
from ..registry import DATASETS
from .bundle import DataBundle, check_shared, rng, spaced

# Named 1-D functions of x (abs, square, relu) or of π·frequency·x (sin, cos, tanh): the targets here, the profile φ
# of the projection dataset.
FUNCTIONS = {
    "sin": lambda x, fr: np.sin(math.pi * fr * x),
    "cos": lambda x, fr: np.cos(math.pi * fr * x),
    "abs": lambda x, fr: np.abs(x),
    "square": lambda x, fr: x**2,
    "relu": lambda x, fr: np.maximum(x, 0.0),
    "tanh": lambda x, fr: np.tanh(math.pi * fr * x),
}
RANDOM_Y = ("uniform", "normal")


@dataclass
class Points1DConfig:
    name: str = "points_1d"
    seed: int = 0  # data seed (random x and/or random y), independent of the training seed
    n_points: int = 10  # number of points N (ignored when x is given)
    x_min: float = -1.0  # left end of the x interval
    x_max: float = 1.0  # right end of the x interval
    x_spacing: str = "even"  # even: linspace(x_min, x_max, N); random: sorted Uniform[x_min, x_max]
    # uniform: y_scale·U[-1,1]; normal: y_scale·N(0,1); or a function: sin, cos, abs, square, relu, tanh
    y_dist: str = "uniform"
    y_scale: float = 1.0  # multiplies the targets
    frequency: float = 1.0  # sin/cos targets are y_scale·sin(π·frequency·x)
    # explicit list of distinct x values (>= 2); overrides n_points/x_min/x_max/x_spacing
    x: list[float] | None = None
    y: list[float] | None = None  # explicit list of targets, same length as x (needs x); overrides y_dist
    n_test: int = 0  # test points (sorted uniform in the interval); only for a function y_dist; 0 = none

    def __post_init__(self):
        check_shared(self)
        check(self.n_points >= 2, "n_points", self.n_points, "an integer >= 2")
        check(self.x_max > self.x_min, "x_max", self.x_max, f"a number > x_min = {self.x_min}")
        check(self.x_spacing in ("even", "random"), "x_spacing", self.x_spacing, "even or random")
        check(self.y_dist in RANDOM_Y + tuple(FUNCTIONS), "y_dist", self.y_dist,
              "one of " + ", ".join(RANDOM_Y + tuple(FUNCTIONS)))
        check(self.y_scale > 0, "y_scale", self.y_scale, "a positive number")
        check(self.n_test == 0 or self.y_dist in FUNCTIONS, "n_test", self.n_test,
              "0 unless y_dist is a named function (random targets have no test split)")
        if self.x is not None:
            check(len(self.x) >= 2, "x", self.x, "a list of >= 2 numbers")
            check(len(set(self.x)) == len(self.x), "x", self.x, "distinct numbers")
        check(self.y is None or self.x is not None, "y", self.y, "null unless x is given too")
        if self.y is not None:
            check(len(self.y) == len(self.x), "y", self.y, f"a list of len(x) = {len(self.x)} numbers")


def _targets(cfg: Points1DConfig, x: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """Targets at x: y_scale·U[-1, 1], y_scale·N(0, 1) or y_scale·f(x) for a named f."""
    if cfg.y_dist == "uniform":
        return cfg.y_scale * gen.uniform(-1.0, 1.0, size=x.shape)
    if cfg.y_dist == "normal":
        return cfg.y_scale * gen.standard_normal(x.shape)
    return cfg.y_scale * FUNCTIONS[cfg.y_dist](x, cfg.frequency)


@DATASETS.register("points_1d", Points1DConfig)
def load_points_1d(cfg: Points1DConfig) -> DataBundle:
    """N scalar points (x_i, y_i) to interpolate, as in Savarese et al. 2019 Figs 1–2 (sorted by x)."""
    gen = rng(cfg.seed, 0)
    if cfg.x is not None:
        x = np.asarray(cfg.x, dtype=np.float64)
    else:
        x = spaced(cfg.x_spacing, cfg.x_min, cfg.x_max, cfg.n_points, gen)
    y = np.asarray(cfg.y, dtype=np.float64) if cfg.y is not None else _targets(cfg, x, gen)
    order = np.argsort(x, kind="stable")
    x, y = x[order, None], y[order, None]  # columns (N, 1)
    x_test = y_test = None
    if cfg.n_test > 0:
        lo, hi = min(cfg.x_min, x.min()), max(cfg.x_max, x.max())
        xt = spaced("random", lo, hi, cfg.n_test, rng(cfg.seed, 1))[:, None]
        x_test, y_test = torch.from_numpy(xt), torch.from_numpy(_targets(cfg, xt, gen))
    meta = {"x_min": float(x.min()), "x_max": float(x.max())}
    return DataBundle("points_1d", torch.from_numpy(x), torch.from_numpy(y), x_test, y_test, meta=meta)
