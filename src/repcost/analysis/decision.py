"""Decision regions of a classifier on a 2-D grid and their tripoints (Jacot 2023 §5, Fig 2).

A tripoint is a point of the input plane where three or more class regions meet. Jacot 2023
(§5, "Multiclass classification") argues that a classifier of Bottleneck rank 1 factors through a
line, g: R² → R, so every boundary point sees at most two classes: deep networks (rank ≈ 1)
show no tripoints, shallow ones do (Fig 2: L = 2 has tripoints, L = 9 none).

On a grid, a tripoint shows up as a 2 × 2 block of neighbouring grid vertices that carries three
or more labels; neighbouring such blocks belong to the same tripoint, so tripoints are counted as
8-connected components of those blocks. A class region about as thin as the grid spacing can
also give such blocks (a diagonal "sliver" along a boundary); `min_separation` discards
components where fewer than three classes cover a fair share of a disc around them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .arrays import apply_model, as_f64


@dataclass
class DecisionGrid:
    """Class labels (ny, nx) of a classifier at the vertices xs (nx,) × ys (ny,) of a grid."""

    xs: np.ndarray
    ys: np.ndarray
    labels: np.ndarray = field(repr=False)


def grid_limits(x: np.ndarray, margin: float = 0.25) -> tuple:
    """((xmin, xmax), (ymin, ymax)) of 2-D points x (N, 2), widened by margin × the larger side."""
    x = as_f64(x)
    lo, hi = x.min(axis=0), x.max(axis=0)
    pad = margin * float(np.max(hi - lo))
    return (float(lo[0] - pad), float(hi[0] + pad)), (float(lo[1] - pad), float(hi[1] + pad))


def decision_grid(f: Callable, xlim: Sequence[float], ylim: Sequence[float], n: int = 300,
                  ny: int | None = None, chunk: int = 65536) -> DecisionGrid:
    """Labels argmax_c f(x)_c on an n × ny grid over xlim × ylim (f: torch (M, 2) → logits (M, C)).

    `f` may be a model (its dtype/device are used) or any callable on float64 tensors.
    """
    ny = n if ny is None else ny
    xs, ys = np.linspace(*xlim, n), np.linspace(*ylim, ny)
    gx, gy = np.meshgrid(xs, ys)  # (ny, nx)
    pts = np.stack([gx.ravel(), gy.ravel()], axis=1)
    logits = apply_model(f, pts, chunk)
    # one logit: a binary classifier, class = [f > 0]
    labels = (logits.reshape(-1) > 0) if logits.ndim == 1 or logits.shape[-1] == 1 else logits.argmax(axis=-1)
    return DecisionGrid(xs, ys, labels.astype(np.int64).reshape(ny, n))


@dataclass
class Tripoints:
    """Tripoints found on a grid: count, locations (count, 2) and the classes meeting at each."""

    count: int
    points: np.ndarray
    classes: list


def count_tripoints(grid: DecisionGrid, min_classes: int = 3, min_separation: float = 0.0,
                    min_area_frac: float = 0.05) -> Tripoints:
    """Group the >= min_classes blocks of a DecisionGrid into 8-connected components: one per tripoint.

    With min_separation = r > 0 a component is kept only if at least min_classes of its classes
    each cover >= min_area_frac of the grid vertices within distance r of its centre, i.e. it is
    a junction of regions of size ~r, not a sliver of one class (thinner than ~min_area_frac·r)
    squeezed along the boundary of two others.
    """
    from scipy import ndimage

    lab = grid.labels  # the 2 × 2 blocks of grid vertices that carry >= min_classes distinct labels
    srt = np.sort(np.stack([lab[:-1, :-1], lab[:-1, 1:], lab[1:, :-1], lab[1:, 1:]], axis=-1), axis=-1)
    mask = 1 + np.sum(srt[..., 1:] != srt[..., :-1], axis=-1) >= min_classes
    comp, n = ndimage.label(mask, structure=np.ones((3, 3), dtype=int))
    xc, yc = 0.5 * (grid.xs[:-1] + grid.xs[1:]), 0.5 * (grid.ys[:-1] + grid.ys[1:])
    gx, gy = np.meshgrid(grid.xs, grid.ys)
    pts, classes = [], []
    for k in range(1, n + 1):
        iy, ix = np.nonzero(comp == k)
        centre = np.array([xc[ix].mean(), yc[iy].mean()])
        cls = set(srt[iy, ix].ravel().tolist())  # the labels at the corners of its blocks
        if min_separation > 0:
            disc = grid.labels[np.hypot(gx - centre[0], gy - centre[1]) <= min_separation]
            big = sum(np.mean(disc == c) >= min_area_frac for c in cls) if disc.size else 0
            if big < min_classes:
                continue
        pts.append(centre)
        classes.append(sorted(int(c) for c in cls))
    return Tripoints(len(pts), np.array(pts).reshape(-1, 2), classes)
