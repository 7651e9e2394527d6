"""Points on a 1-D curve in the plane for (denoising) autoencoders (Jacot 2023, Fig 3 B–C)."""

from __future__ import annotations

import math
from dataclasses import dataclass
import numpy as np
import torch

from ..errors import check
from ..registry import DATASETS
from .bundle import DataBundle, arclength, check_shared, points_at_arclength, rng, two_splits

SHAPES = ("sine", "arc", "spiral", "circle")
CLOSED = ("circle",)
DENSE = 4097  # polyline vertices used for arc length, sampling and distances (chord error ~1e-7)
GRID = np.linspace(0.0, 1.0, DENSE)  # their curve parameters


@dataclass
class Curve2DConfig:
    name: str = "curve_2d"
    seed: int = 0  # data seed (positions along the curve, noise)
    shape: str = "sine"  # sine, arc (upper half circle), spiral (open, radius 0.2→1) or circle (closed); all in [-1,1]²
    n_train: int = 100  # training points
    n_test: int = 100  # test points (0 = no test split)
    noise: float = 0.0  # inputs = clean points + N(0, noise²) (train and test); targets are the clean points
    sampling: str = "random"  # random: uniform in arc length; even: equally spaced in arc length
    amplitude: float = 0.5  # sine only: y = amplitude·sin(π·frequency·x), x ∈ [-1, 1]
    frequency: float = 1.0  # sine only: half-periods over [-1, 1]
    turns: float = 1.5  # spiral only: number of turns

    def __post_init__(self):
        check_shared(self)
        check(self.shape in SHAPES, "shape", self.shape, "one of " + ", ".join(SHAPES))
        check(self.sampling in ("random", "even"), "sampling", self.sampling,
              "random (uniform in arc length) or even (equally spaced in arc length)")
        check(self.amplitude > 0, "amplitude", self.amplitude, "a positive number (sine only)")
        check(self.frequency > 0, "frequency", self.frequency, "a positive number (sine only)")
        check(self.turns > 0, "turns", self.turns, "a positive number of turns (spiral only)")


def curve_param(cfg: Curve2DConfig, t: np.ndarray) -> np.ndarray:
    """The curve at parameters t ∈ [0, 1]: points (len(t), 2) inside [−1, 1]².

    sine:   (2t − 1, amplitude·sin(π·frequency·(2t − 1)))      open
    arc:    the upper unit half-circle (cos πt, sin πt)           open
    spiral: radius 0.2 → 1 over `turns` turns (Archimedean)       open
    circle: the unit circle (cos 2πt, sin 2πt)                    closed
    """
    if cfg.shape == "sine":
        u = 2 * t - 1
        return np.stack([u, cfg.amplitude * np.sin(math.pi * cfg.frequency * u)], axis=-1)
    if cfg.shape == "arc":
        return np.stack([np.cos(math.pi * t), np.sin(math.pi * t)], axis=-1)
    if cfg.shape == "spiral":
        theta, r = 2 * math.pi * cfg.turns * t, 0.2 + 0.8 * t
        return np.stack([r * np.cos(theta), r * np.sin(theta)], axis=-1)
    return np.stack([np.cos(2 * math.pi * t), np.sin(2 * math.pi * t)], axis=-1)


def curve_points(cfg: Curve2DConfig, n: int) -> torch.Tensor:
    """n float64 points equally spaced in arc length along the curve (a closed curve omits the repeated end)."""
    s = np.linspace(0.0, 1.0, n, endpoint=cfg.shape not in CLOSED)
    return torch.from_numpy(points_at_arclength(lambda t: curve_param(cfg, t), s, GRID))


def distance_to_curve(cfg: Curve2DConfig, pts, k: int = 8) -> np.ndarray:
    """Distance (N,) of 2-D points (N, 2: an array, or a CPU tensor) to the curve, float64.

    The distance to the DENSE-vertex polyline through the curve over the segments that touch the k
    vertices nearest to each point (a KD-tree query). The polyline is within ~1e-7 of the curve;
    restricting to those segments is exact except for points about equidistant from two distant parts
    of the curve, where the error is O(h²/distance), h ≈ length/4096.
    """
    from scipy.spatial import cKDTree

    p = np.asarray(pts, dtype=np.float64).reshape(-1, 2)
    verts = curve_param(cfg, GRID)
    a, d = verts[:-1], np.diff(verts, axis=0)  # segments a + u·d, u ∈ [0, 1]
    _, ik = cKDTree(verts).query(p, k=k)
    seg = np.clip(np.concatenate([ik - 1, ik], axis=1), 0, len(a) - 1)  # (N, 2k) candidate segments
    aa, dd = a[seg], d[seg]  # (N, 2k, 2)
    u = np.clip(((p[:, None] - aa) * dd).sum(-1) / np.maximum((dd * dd).sum(-1), 1e-300), 0.0, 1.0)
    return np.sqrt(((p[:, None] - (aa + u[..., None] * dd)) ** 2).sum(-1).min(1))


def _split(cfg: Curve2DConfig, n: int, stream: int):
    """(noisy inputs, clean targets) for n points, uniform (or even) in arc length."""
    gen = rng(cfg.seed, stream)
    y = (curve_points(cfg, n).numpy() if cfg.sampling == "even"
         else points_at_arclength(lambda t: curve_param(cfg, t), gen.uniform(size=n), GRID))
    x = y + cfg.noise * gen.standard_normal(y.shape) if cfg.noise > 0 else y.copy()
    return torch.from_numpy(x), torch.from_numpy(y)


@DATASETS.register("curve_2d", Curve2DConfig)
def load_curve_2d(cfg: Curve2DConfig) -> DataBundle:
    """Autoencoder data on a plane curve: targets = clean points, inputs = points + N(0, noise²) (Jacot 2023 Fig 3)."""
    length = float(arclength(curve_param(cfg, GRID))[-1])  # of the DENSE-vertex polyline
    meta = {"shape": cfg.shape, "closed": cfg.shape in CLOSED, "length": length, "noise": cfg.noise}
    return DataBundle("curve_2d", *two_splits(lambda n, stream: _split(cfg, n, stream), cfg.n_train, cfg.n_test),
                      meta=meta)
