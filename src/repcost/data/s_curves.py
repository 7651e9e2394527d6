"""Four classes on identical inverted-S curves translated along the x-axis (Jacot 2023, Fig 2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import check
from ..registry import DATASETS
from .bundle import DataBundle, check_shared, points_at_arclength, rng, two_splits

T_MAX = 1.5 * math.pi  # the curve parameter runs over [-3π/2, 3π/2]


@dataclass
class SCurvesConfig:
    name: str = "s_curves"
    seed: int = 0  # data seed (positions along the curves, noise)
    n_classes: int = 4  # number of classes = curves (the paper: 4)
    n_per_class: int = 50  # training points per class
    n_test_per_class: int = 50  # test points per class (0 = no test split)
    spacing: float = 1.5  # x-translation between neighbouring curves; each curve is 1 wide, 2 high (arcs: must be > 1)
    noise: float = 0.0  # std of isotropic Gaussian noise added to the points (train and test)
    sampling: str = "random"  # random: uniform along each curve; even: equally spaced (classes are exact translates)
    # arcs: an S of two 3/4-circles (folds back); wave: the graph x = sin(t)/2, y = 2t/3π (interleaves at spacing < 1)
    shape: str = "arcs"

    def __post_init__(self):
        check_shared(self)
        check(self.n_classes >= 2, "n_classes", self.n_classes, "an integer >= 2 (the paper uses 4)")
        check(self.n_per_class >= 1, "n_per_class", self.n_per_class, "an integer >= 1")
        check(self.n_test_per_class >= 0, "n_test_per_class", self.n_test_per_class, "an integer >= 0")
        check(self.shape in CURVES, "shape", self.shape,
              "arcs (an S of two 3/4-circles) or wave (an S-shaped graph x = g(y))")
        check(self.spacing > 0, "spacing", self.spacing, "a positive x-translation between curves")
        check(self.shape == "wave" or self.spacing > 1, "spacing", self.spacing,
              "> 1 for shape=arcs (its width-1 curves fold back, so closer translates intersect); "
              "use shape=wave for interleaved curves")
        check(self.sampling in ("random", "even"), "sampling", self.sampling,
              "random (uniform along the curve) or even (equally spaced along it)")


def inverted_s(t: np.ndarray) -> np.ndarray:
    """Points (len(t), 2) of a mirrored 'S' (Ƨ) of width 1, height 2, centred at 0; t ∈ [−3π/2, 3π/2].

    This is the 2-D S of sklearn's make_s_curve, (sin t, sign(t)(cos t − 1)), mirrored in x and
    halved: unit-speed up to the factor ½, so uniform t is uniform along the curve. It runs from
    the top-left end (−½, ½) over the top (0, 1), through the centre (0, 0) at t = 0, to the
    bottom-right end (½, −½).
    """
    return 0.5 * np.stack([-np.sin(t), np.sign(t) * (np.cos(t) - 1.0)], axis=-1)


def inverted_s_wave(t: np.ndarray) -> np.ndarray:
    """Points (len(t), 2) of an inverted S drawn as a graph x = ½ sin(t), y = 2t/(3π); t ∈ [−3π/2, 3π/2].

    Width 1, height 2, from the top-left end (−½, 1) through the centre to the bottom-right end
    (½, −1). Being a graph over y, its x-translates never intersect, so at a spacing below 1 the
    classes interleave and no vertical stripes separate them.
    """
    return np.stack([0.5 * np.sin(t), t / T_MAX], axis=-1)


CURVES = {"arcs": inverted_s, "wave": inverted_s_wave}


def _split(cfg: SCurvesConfig, offsets: list[float], n: int, stream: int):
    gen = rng(cfg.seed, stream)
    curve, k = CURVES[cfg.shape], cfg.n_classes
    # a row of arc-length fractions per class (one draw, in the order a per-class loop would make)
    u = np.tile(np.linspace(0.0, 1.0, n), (k, 1)) if cfg.sampling == "even" else gen.uniform(0.0, 1.0, size=(k, n))
    pts = points_at_arclength(curve, u, np.linspace(-T_MAX, T_MAX, 4097))  # (k, n, 2)
    x = np.concatenate([pts[c] + np.array([dx, 0.0]) for c, dx in enumerate(offsets)])
    if cfg.noise > 0:
        x = x + cfg.noise * gen.standard_normal(x.shape)
    return torch.from_numpy(x), torch.from_numpy(np.repeat(np.arange(k, dtype=np.int64), n))


@DATASETS.register("s_curves", SCurvesConfig)
def load_s_curves(cfg: SCurvesConfig) -> DataBundle:
    """Class c = points on an inverted S shifted by offsets[c] along x (+ noise), Jacot 2023 Fig 2."""
    offsets = ((np.arange(cfg.n_classes) - (cfg.n_classes - 1) / 2) * cfg.spacing).tolist()  # the dataset centred
    splits = two_splits(lambda n, stream: _split(cfg, offsets, n, stream), cfg.n_per_class, cfg.n_test_per_class)
    meta = {"offsets": offsets, "spacing": cfg.spacing, "shape": cfg.shape}
    return DataBundle("s_curves", *splits, task="classification", n_classes=cfg.n_classes, meta=meta)
