"""2-D (or d-D) inputs whose labels depend on one projection, y = φ(uᵀx) (Ongie & Willett Fig 1).

Inputs are i.i.d. uniform on [−x_max, x_max]^d (or standard normal); the label direction u is
`direction` normalised; φ is a named 1-D function of the projection t = uᵀx.  An interpolant of
the form φ̂(uᵀx) exists, so a net whose ReLU units all lie along ±u (rank-one effective matrix)
can fit the data — the parsimonious low-dimensional interpolant Ongie & Willett §4.2, §5.3
predict linear layers favour.  meta holds u (`direction`) and u⊥ (`perpendicular`, for d = 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import check
from ..registry import DATASETS
from .bundle import DataBundle, check_shared, function_bundle, rng
from .points_1d import FUNCTIONS

@dataclass
class ProjectionConfig:
    name: str = "projection"
    seed: int = 0  # data seed (inputs)
    n_points: int = 20  # training samples
    n_test: int = 0  # test samples (0 = no test split)
    d: int = 2  # input dimension
    direction: list[float] = field(default_factory=lambda: [1.0, 1.0])  # label direction u (normalised); length d
    profile: str = "sin"  # φ: sin | cos | tanh (of π·frequency·t) | abs | relu | square (of t)
    frequency: float = 1.0  # for sin, cos, tanh
    y_scale: float = 1.0  # labels are y_scale·φ(uᵀx)
    x_dist: str = "uniform"  # uniform on [−x_max, x_max]^d, or normal with std x_max
    x_max: float = 1.0

    def __post_init__(self):
        check_shared(self)
        check(self.n_points >= 1, "n_points", self.n_points, "an integer >= 1")
        check(self.d >= 1, "d", self.d, "an integer >= 1")
        check(len(self.direction) == self.d and any(v != 0 for v in self.direction), "direction",
              self.direction, f"a nonzero vector of length d = {self.d}")
        check(self.profile in FUNCTIONS, "profile", self.profile, "one of " + ", ".join(FUNCTIONS))
        check(self.frequency > 0, "frequency", self.frequency, "a positive number")
        check(self.y_scale > 0, "y_scale", self.y_scale, "a positive number")
        check(self.x_dist in ("uniform", "normal"), "x_dist", self.x_dist, "uniform or normal")
        check(self.x_max > 0, "x_max", self.x_max, "a positive number")


@DATASETS.register("projection", ProjectionConfig)
def load_projection(cfg: ProjectionConfig) -> DataBundle:
    """x_i random in R^d, y_i = y_scale·φ(uᵀx_i) (Ongie & Willett Fig 1)."""
    u = np.asarray(cfg.direction, dtype=np.float64)
    u = u / np.linalg.norm(u)  # the label direction

    def labels(x):
        return torch.as_tensor(cfg.y_scale * FUNCTIONS[cfg.profile](x.numpy() @ u, cfg.frequency)).reshape(-1, 1)

    def inputs(n: int, stream: int) -> torch.Tensor:
        g = rng(cfg.seed, stream)
        if cfg.x_dist == "uniform":
            return torch.as_tensor(g.uniform(-cfg.x_max, cfg.x_max, size=(n, cfg.d)))
        return torch.as_tensor(cfg.x_max * g.standard_normal((n, cfg.d)))

    meta = {"direction": u.tolist()}
    if cfg.d == 2:
        meta["perpendicular"] = [-float(u[1]), float(u[0])]
    return function_bundle("projection", cfg, labels, inputs, cfg.n_points, meta)
