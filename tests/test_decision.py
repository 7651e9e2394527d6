"""Decision regions on a grid and tripoint counts (Jacot 2023 Fig 2) on hand-built classifiers."""

import numpy as np
import torch

from repcost.analysis.decision import count_tripoints, decision_grid, grid_limits


def sectors(k, centre=(0.0, 0.0)):
    """k classes in equal angular sectors around centre: logits = cos(angle − 2πc/k)·r (linear)."""
    ang = 2 * np.pi * np.arange(k) / k
    W = torch.tensor(np.stack([np.cos(ang), np.sin(ang)], 1))
    c = torch.tensor(centre)
    return lambda x: (x - c) @ W.T


def stripes(x):
    """A 'rank-1' classifier: the class depends on x only through g(x) = x₀ + 0.3·x₁ (4 stripes)."""
    g = x[:, 0] + 0.3 * x[:, 1]
    centres = torch.tensor([-1.5, -0.5, 0.5, 1.5], dtype=x.dtype)
    return -(g[:, None] - centres[None]) ** 2


def test_three_sectors_have_one_tripoint_at_their_centre():
    g = decision_grid(sectors(3, (0.2, -0.1)), (-1, 1), (-1, 1), n=101)
    tp = count_tripoints(g)
    assert tp.count == 1 and tp.classes == [[0, 1, 2]]
    assert np.allclose(tp.points[0], [0.2, -0.1], atol=0.03)


def test_four_quadrants_meet_at_one_point_counted_once():
    tp = count_tripoints(decision_grid(sectors(4), (-1, 1), (-1, 1), n=80))
    assert tp.count == 1 and tp.classes[0] == [0, 1, 2, 3]


def test_rank_one_classifier_has_no_tripoints_but_boundaries():
    g = decision_grid(stripes, (-2, 2), (-2, 2), n=200)
    assert set(np.unique(g.labels)) == {0, 1, 2, 3}
    assert count_tripoints(g).count == 0  # not a single 2 × 2 block carries three classes


def test_two_separate_junctions_are_two_tripoints():
    def two(x):  # sectors around (-1, 0) for x0 < 0, around (1, 0) with other labels for x0 >= 0
        a, b = sectors(3, (-1.0, 0.0))(x), sectors(3, (1.0, 0.0))(x)
        out = torch.full((len(x), 6), -1e9, dtype=x.dtype)
        left = x[:, 0] < 0
        out[left, :3], out[~left, 3:] = a[left], b[~left]
        return out
    tp = count_tripoints(decision_grid(two, (-2, 2), (-1, 1), n=201, ny=101))
    # each half has its own 3-class junction; the seam x0 = 0 adds more junctions where
    # the sector boundaries hit it, so count only those near the two centres
    near = [p for p in tp.points if min(np.hypot(*(p - [-1, 0])), np.hypot(*(p - [1, 0]))) < 0.05]
    assert len(near) == 2


def test_sliver_is_rejected_with_min_separation():
    def sliver(x):  # classes 0 | 1 split along x0 = x1, with a class-2 band of width ~0.004 on the diagonal
        d = x[:, 0] - x[:, 1]
        out = torch.stack([-d, d, torch.full_like(d, -1e9)], 1)
        out[d.abs() < 0.003, 2] = 1e9
        return out
    g = decision_grid(sliver, (-1, 1), (-1, 1), n=200)
    assert count_tripoints(g).count >= 1
    assert count_tripoints(g, min_separation=0.2).count == 0


def test_grid_limits_pad_the_data_box():
    (x0, x1), (y0, y1) = grid_limits(np.array([[0.0, 0.0], [2.0, 1.0]]), margin=0.5)
    assert (x0, x1, y0, y1) == (-1.0, 3.0, -1.0, 2.0)
