"""Samples on two rays in R² from the origin (Ongie & Willett §5.2, Figs 2–4)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import check
from ..registry import DATASETS
from .bundle import DataBundle, check_shared, rng, spaced


@dataclass
class TwoRaysConfig:
    name: str = "two_rays"
    seed: int = 0  # data seed; used only when spacing = random
    angle: float = 2 * math.pi / 3  # angle between the rays in radians (2π/3); must lie in (π/2, π) so w1ᵀw2 < 0
    angle_pi: float | None = None  # if set, the angle is angle_pi·π (e.g. 0.55, 0.52) and overrides angle
    # direction of ray 1 (normalised); ray 2 is w1 rotated by the angle
    w1: list[float] = field(default_factory=lambda: [2.0, 1.0])
    points_per_ray: int = 5  # samples on each ray
    t_min: float = 0.2  # smallest distance from the origin (> 0)
    t_max: float = 1.0  # largest distance from the origin
    spacing: str = "even"  # even: linspace(t_min, t_max); random: sorted Uniform[t_min, t_max] per ray
    # label on ray j is slopes[j]·t + offsets[j]; defaults are fit by [w1ᵀx]₊ + [w2ᵀx]₊
    slopes: list[float] = field(default_factory=lambda: [1.0, 1.0])
    offsets: list[float] = field(default_factory=lambda: [0.0, 0.0])  # label offsets per ray

    def __post_init__(self):
        check_shared(self)
        if self.angle_pi is not None:
            check(0.5 < self.angle_pi < 1.0, "angle_pi", self.angle_pi,
                  "a number in (0.5, 1) (angle/π, so that w1ᵀw2 < 0 and w1 ≠ -w2), or null")
        check(math.pi / 2 < self.angle < math.pi, "angle", self.angle,
              "radians in (π/2, π), so that w1ᵀw2 < 0 and w1 ≠ -w2")
        check(len(self.w1) == 2 and any(v != 0 for v in self.w1), "w1", self.w1, "a nonzero 2-vector")
        check(self.points_per_ray >= 1, "points_per_ray", self.points_per_ray, "an integer >= 1")
        check(self.t_min > 0, "t_min", self.t_min, "a positive distance (rays exclude the origin)")
        check(self.t_max > self.t_min, "t_max", self.t_max, f"a number > t_min = {self.t_min}")
        check(self.spacing in ("even", "random"), "spacing", self.spacing, "even or random")
        check(len(self.slopes) == 2, "slopes", self.slopes, "a list of 2 numbers (one per ray)")
        check(len(self.offsets) == 2, "offsets", self.offsets, "a list of 2 numbers (one per ray)")


@DATASETS.register("two_rays", TwoRaysConfig)
def load_two_rays(cfg: TwoRaysConfig) -> DataBundle:
    """Points x = t·w_j on two rays with labels y = slope_j·t + offset_j (Ongie & Willett §5.2): unit w1 ∝ cfg.w1,
    w2 = w1 rotated by θ, and w0 = (w1 − w2)/‖w1 − w2‖ in meta."""
    w1 = np.asarray(cfg.w1, dtype=np.float64)
    w1 = w1 / np.linalg.norm(w1)
    theta = cfg.angle_pi * math.pi if cfg.angle_pi is not None else cfg.angle  # the angle between the rays
    c, s = math.cos(theta), math.sin(theta)
    w2 = np.array([[c, -s], [s, c]]) @ w1
    w0 = (w1 - w2) / np.linalg.norm(w1 - w2)
    t = [spaced(cfg.spacing, cfg.t_min, cfg.t_max, cfg.points_per_ray, rng(cfg.seed, j)) for j in range(2)]
    x = torch.as_tensor(np.concatenate([t[0][:, None] * w1[None, :], t[1][:, None] * w2[None, :]]))
    y = torch.as_tensor(np.concatenate([cfg.slopes[j] * t[j] + cfg.offsets[j] for j in range(2)])).reshape(-1, 1)
    ray = [j for j in range(2) for _ in t[j]]  # the ray of each sample
    meta = {"w1": w1.tolist(), "w2": w2.tolist(), "w0": w0.tolist(), "angle": theta, "ray": ray}
    return DataBundle("two_rays", x, y, meta=meta)
