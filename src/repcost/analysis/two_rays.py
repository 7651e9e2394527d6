"""Ongie & Willett §5.2–5.3: interpolants of samples on two rays, Prop 5.2, and unit alignment.

Every net here is a :class:`~repcost.analysis.relu_1d.TwoLayerNet` h(x) = Σ_k a_k [w_kᵀx + b_k]₊ + c.

Two rays from the origin in R² with unit directions w1, w2, w1ᵀw2 < 0 (separation angle
α ∈ (π/2, π)).  Samples on ray j are x = t·w_j, t > 0, with labels y.  On each ray we take the
linear spline through (0, 0) and the ray's samples, extended linearly past the last sample:

    f_j(t) = Σ_k a_{j,k} [t − τ_{j,k}]₊,   0 = τ_{j,1} < τ_{j,2} < …   (kinks at the samples),

so f (§5.2) has units a_{j,k}[w_jᵀx − τ_{j,k}]₊.  Because w1ᵀw2 < 0 and τ ≥ 0, a unit along w_j
is inactive on the other ray, so f interpolates.  g (§5.2) replaces w_j by ±w0,
w0 = (w1 − w2)/‖w1 − w2‖, with ã = a/|w_jᵀw0| and b̃ = |w_jᵀw0|·b; here |w_jᵀw0| = sin(α/2),
and ±w0ᵀx is again negative on the other ray, so g interpolates the same samples.

Prop 5.2 (Ongie & Willett): R2(f) < R2(g), and R3(g) < R3(f) provided (`prop52_margin` ≥ 0)

    1/cos²(θ/2) ≤ 1 + 4 ‖a1‖₁‖a2‖₁ / ‖a‖₁² · |sin θ|,

with 0 < θ ≤ π/2 "the smallest angle between w1, w2" — the angle between the two *lines*,
θ = π − α for a ray separation α ∈ (π/2, π).  (With θ = π − α, cos(θ/2) = sin(α/2) = |w_jᵀw0|,
which is exactly the factor by which g's outer weights grow, so the condition compares
Φ3(g) = (‖a‖₁/sin(α/2))^{2/3} with the lower bound (39) on Φ3(f).)  Here a1, a2 are f's outer
weights on unit-norm rows.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .arrays import as_f64, as_matrix, as_vector
from .relu_1d import TwoLayerNet, linear_spline_interpolant, min_norm_relu_net_1d


def line_angle(separation: float) -> float:
    """Prop 5.2's θ ∈ (0, π/2]: the smallest angle between the lines of w1, w2 at ray separation α (= min(α, π − α))."""
    a = float(separation) % math.pi
    return min(a, math.pi - a)


def prop52_margin(separation: float, a1, a2) -> float:
    """RHS − LHS of Prop 5.2's condition, 1 + 4‖a1‖₁‖a2‖₁/‖a‖₁²·|sin θ| − 1/cos²(θ/2) (≥ 0: the condition holds)."""
    n1, n2 = float(np.sum(np.abs(a1))), float(np.sum(np.abs(a2)))
    th = line_angle(separation)
    return 1.0 + 4.0 * n1 * n2 / (n1 + n2) ** 2 * abs(math.sin(th)) - 1.0 / math.cos(th / 2.0) ** 2


def ray_units(t, y, tol: float = 1e-12):
    """(a, τ) with Σ_k a_k[s − τ_k]₊ = the linear spline through (0, 0) and (t_i, y_i), t_i > 0 (module docstring)."""
    t = as_vector(t, "t")
    y = as_vector(y, "y")
    if np.any(t <= 0):
        raise ValueError("ray samples need t > 0")
    o = np.argsort(t)
    t, y = np.concatenate([[0.0], t[o]]), np.concatenate([[0.0], y[o]])
    slopes = np.diff(y) / np.diff(t)
    a = np.diff(np.concatenate([[0.0], slopes]))  # slope jumps at 0 = t_0 < t_1 < … < t_{n−1}
    keep = np.abs(a) > tol * max(1.0, np.max(np.abs(a)))
    return a[keep], t[:-1][keep]


def f_and_g(w1, w2, rays) -> tuple[TwoLayerNet, TwoLayerNet]:
    """§5.2's f, units along the rays a_{j,k}[w_jᵀx − τ_{j,k}]₊, and g, units along ±w0 with ã = a/|w_jᵀw0| and
    b̃ = |w_jᵀw0|·b (it interpolates the same samples); rays = [(a_1, τ_1), (a_2, τ_2)] from :func:`ray_units`."""
    w1, w2 = (np.asarray(w, dtype=np.float64) / np.linalg.norm(w) for w in (w1, w2))
    w0 = (w1 - w2) / np.linalg.norm(w1 - w2)
    ray = np.repeat([0, 1], [len(rays[0][0]), len(rays[1][0])])  # each unit's ray j
    a = np.concatenate([np.asarray(aj, dtype=np.float64) for aj, _ in rays])
    tau = np.concatenate([np.asarray(tj, dtype=np.float64) for _, tj in rays])
    s = np.abs([w1 @ w0, w2 @ w0])[ray]  # |w_jᵀw0|
    return TwoLayerNet(np.stack([w1, w2])[ray], a, -tau), TwoLayerNet(np.stack([w0, -w0])[ray], a / s, -s * tau)


def projection_interpolant(x, y, u) -> TwoLayerNet:
    """Min-R2 interpolant of the projections (uᵀx_i, y_i) lifted to R^d: units ±u (rank one, §5.3 / Fig 5).

    The 1-D interpolant is Savarese's minimiser (linear spline, eq. 27) realised by a balanced net
    (:func:`repcost.analysis.relu_1d.min_norm_relu_net_1d`); raises ValueError when two samples
    with different labels project to the same point (no interpolant on span(u)).
    """
    x = as_matrix(x, "x")
    u = as_vector(u, "u") / np.linalg.norm(u)
    p = x @ u
    net = min_norm_relu_net_1d(linear_spline_interpolant(p, as_vector(y, "y")))
    return TwoLayerNet(net.W * u[None, :], net.a[:, 0], net.b, float(net.c[0]))


def directional_variation(net: TwoLayerNet, x, u) -> float:
    """RMS over x of |u⊥ᵀ∇h| / RMS of ‖∇h‖ (d = 2): how much h varies perpendicular to u (0 = h(x) = φ(uᵀx))."""
    x = as_matrix(x, "x")
    u = as_vector(u, "u") / np.linalg.norm(u)
    perp = np.array([-u[1], u[0]])
    G = ((x @ net.W.T + net.b > 0) * net.a) @ net.W  # ∇h = Σ_k a_k 1[w_kᵀx + b_k > 0] w_k at each row
    tot = float(np.sqrt(np.mean(np.sum(G**2, axis=1))))
    return float(np.sqrt(np.mean((G @ perp) ** 2))) / tot if tot > 0 else 0.0


def net_from_model(model) -> TwoLayerNet:
    """The equivalent 2-layer representation (W = W_{L−1}⋯W_1, a, b, c) of a scalar-output linear_relu model, float64.

    Units whose |a_k|‖w_k‖ ≤ 1e-10·max are dropped (dead after weight decay; their contribution to every output
    and cost is below rounding).
    """
    W, a, b = as_f64(model.effective_matrix()), as_vector(model.a, "a"), as_f64(model.b)  # ValueError unless scalar
    c = float(as_f64(model.c)[0]) if model.c is not None else 0.0
    m = np.abs(a) * np.linalg.norm(W, axis=1)
    keep = m > 1e-10 * (m.max() if m.size and m.max() > 0 else 1.0)
    return TwoLayerNet(W[keep], a[keep], b[keep], c)


def alignment_summary(net: TwoLayerNet, w0=None, rays: Sequence = ()) -> dict:
    """Singular values of W, s2/s1, the angle (deg, in [0, 90]) from W's top right singular vector to the line of
    w0, and the angle (deg, in [0, 180]) from each unit's w_k to its nearest *ray* among `rays`, averaged with the
    weights |a_k|‖w_k‖."""
    W = net.W
    _, s, Vt = np.linalg.svd(W, full_matrices=False)
    out = {"n_units": int(W.shape[0]), "s": s, "s2_over_s1": float(s[1] / s[0]) if s.size > 1 and s[0] > 0 else 0.0}
    if w0 is not None:
        v, u = Vt[0] / np.linalg.norm(Vt[0]), as_vector(w0, "w0") / np.linalg.norm(w0)
        dot = float(v @ u)
        out["v1_angle_to_w0_deg"] = float(np.degrees(np.arctan2(np.linalg.norm(v - dot * u), abs(dot))))  # accurate near 0
    if len(rays):
        wts = np.abs(net.a) * np.linalg.norm(W, axis=1)
        D = np.stack([as_vector(d, "direction") / np.linalg.norm(d) for d in rays])
        ang = np.degrees(np.arccos(np.clip(((W / np.linalg.norm(W, axis=1, keepdims=True)) @ D.T).max(axis=1), -1, 1)))
        out["unit_angle_to_rays_deg"] = float(np.sum(wts * ang) / np.sum(wts))
    return out


def f_and_g_for_data(data) -> tuple:
    """§5.2's f and g for the samples of a two_rays DataBundle (both interpolate them), and the rays' units."""
    x = data.x_train.double().numpy()
    y = data.y_train.double().numpy()[:, 0]
    ray = np.asarray(data.meta["ray"])
    w1, w2 = np.asarray(data.meta["w1"]), np.asarray(data.meta["w2"])
    units = [ray_units(x[ray == j] @ w, y[ray == j]) for j, w in enumerate((w1, w2))]  # t = w_jᵀx on ray j
    return *f_and_g(w1, w2, units), units
