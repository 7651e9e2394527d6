"""Tests for the representation-cost functions (Ongie & Willett §3; Savarese et al. §3 and App. C)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from repcost.analysis.arrays import as_f64
from repcost.analysis.costs import (
    cost_CL,
    effective_matrix,
    path_norm,
    phi3_lower_bound,
    phi3_upper_bound,
    phi_L,
    phi_L_solve,
    active_subnetworks,
    l2L_quasinorm,
    parallel_alpha_normalised,
    parallel_balance,
)
from repcost.analysis.spectra import schatten_cost
from repcost.analysis.spectra import singular_values
from repcost.analysis.relu_1d import (PiecewiseLinear1D, deep_relu_net_1d_function, linear_spline_interpolant,
                                      min_norm_relu_net_1d, spline_min_cost)

TOL = 1e-8
DEPTHS = [2, 3, 4, 5]


def _interpolated(knots, values, left_slope: float, right_slope: float) -> PiecewiseLinear1D:
    """Linear interpolation of (knots, values) extended by the given end slopes."""
    knots, values = np.asarray(knots, dtype=float), np.asarray(values, dtype=float)
    return PiecewiseLinear1D(knots, values, np.concatenate([[left_slope], np.diff(values) / np.diff(knots),
                                                            [right_slope]]))


def _min_factorisation_cost(W, a, L):
    """(1/L)‖a‖² + ((L−1)/L)‖W‖_{S_q}^q, q = 2/(L−1): min of C_L over factorisations of W (Ongie eq. 10)."""
    sq = schatten_cost(singular_values(W), L - 1, max(W.shape) * np.finfo(float).eps)
    return float(a @ a / L + (L - 1) / L * sq)


def _balanced_factorisation(W, a, L):
    """(Ws, a', s): a factored network with C_L = Φ_L(W, a) and W_{L−1}⋯W_1 = D_s W (Ongie Lemma 3.4's optimal λ,
    the AM-GM scale of its proof, the balanced SVD split of Lemma 3.2).

    With λ* optimal and S = ‖D_λ*⁻¹ D_|a| W‖_{S_q}, c = S^{1/L}: a'_k = c·sign(a_k)·λ*_k and
    W' = D_s W with s_k = |a_k|/(c λ*_k), so a'_k w'_k = a_k w_k, ‖a'‖² = c² and ‖W'‖_{S_q}^q = c^{-q} S^q,
    whose weighted AM-GM is tight. Then W' = UΣVᵀ is split as W_1 = Σ^{1/(L−1)}Vᵀ, W_i = Σ^{1/(L−1)},
    W_{L−1} = UΣ^{1/(L−1)}, for which Σ‖W_i‖²_F = (L−1)‖W'‖_{S_q}^q (Lemma 3.2, proof A.2).
    """
    value, lam = phi_L_solve(W, a, L)
    act, c = lam > 0, value**0.5  # Φ_L = S^{2/L} and c = S^{1/L}; λ is zero on dead units only
    s, a_new = np.zeros(len(a)), np.zeros(len(a))
    s[act] = np.abs(a[act]) / (c * lam[act])
    a_new[act] = c * np.sign(a[act]) * lam[act]
    U, sig, Vt = np.linalg.svd(s[:, None] * W, full_matrices=False)
    r = max(np.linalg.matrix_rank(W), 1)
    root = sig[:r] ** (1.0 / (L - 1))
    if L == 2:
        return [s[:, None] * W], a_new, s
    return [root[:, None] * Vt[:r]] + [np.diag(root)] * (L - 3) + [U[:, :r] * root[None, :]], a_new, s


def _orthonormal(rng, n, d):
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return Q[:n]


# ----------------------------------------------------------------------------------------------
# Ongie: Φ_L closed forms (Prop 3.5, Cor 3.6, Cor 3.7), path norm
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("L", DEPTHS)
def test_phi_rank_one_unit_rows_cor36(L):
    rng = np.random.default_rng(10 + L)
    v = rng.normal(size=5)
    v /= np.linalg.norm(v)
    signs = rng.choice([-1.0, 1.0], size=7)
    W = signs[:, None] * v[None, :]
    a = rng.normal(size=7)
    expected = np.sum(np.abs(a)) ** (2 / L)
    assert abs(phi_L(W, a, L, closed_form=False) - expected) < TOL
    assert abs(phi_L(W, a, L) - expected) < TOL


@pytest.mark.parametrize("L", DEPTHS)
def test_phi_orthonormal_rows_cor37(L):
    rng = np.random.default_rng(20 + L)
    W = _orthonormal(rng, 4, 6)
    a = rng.normal(size=4) * np.array([1.0, 0.1, 3.0, 0.5])
    expected = np.sum(np.abs(a) ** (2 / L))
    assert abs(phi_L(W, a, L, closed_form=False) - expected) < TOL


@pytest.mark.parametrize("L", DEPTHS)
def test_phi_clustered_orthonormal_rows_prop35(L):
    rng = np.random.default_rng(30 + L)
    V = _orthonormal(rng, 3, 5)
    cluster = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 2])
    signs = rng.choice([-1.0, 1.0], size=cluster.size)
    W = signs[:, None] * V[cluster]
    a = rng.normal(size=cluster.size)
    expected = sum(np.sum(np.abs(a[cluster == j])) ** (2 / L) for j in range(3))
    assert abs(phi_L(W, a, L, closed_form=False) - expected) < TOL


def test_path_norm_hand_example_and_phi2():
    W = np.array([[3.0, 4.0], [1.0, 0.0], [0.0, -2.0]])
    a = np.array([2.0, -1.0, 0.5])
    assert path_norm(W, a) == pytest.approx(2 * 5 + 1 * 1 + 0.5 * 2)
    rng = np.random.default_rng(0)
    W, a = rng.normal(size=(6, 3)), rng.normal(size=6)
    # Lemma 3.4 at L = 2 (q = 2, Frobenius norm) reduces to eq. (13).
    assert abs(phi_L(W, a, 2, closed_form=False) - path_norm(W, a)) < TOL
    assert phi_L(W, a, 2) == pytest.approx(path_norm(W, a), abs=1e-12)


def test_phi_dead_units_and_torch_input():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    W, a = rng.normal(size=(5, 3)), rng.normal(size=5)
    W2 = np.vstack([W, np.zeros((1, 3)), rng.normal(size=(1, 3))])
    a2 = np.concatenate([a, [4.0, 0.0]])
    assert phi_L(W2, a2, 3) == pytest.approx(phi_L(W, a, 3), abs=1e-10)
    assert phi_L(torch.tensor(W, dtype=torch.float32), torch.tensor(a), 3) == pytest.approx(
        phi_L(as_f64(torch.tensor(W, dtype=torch.float32)), a, 3), abs=1e-12
    )
    assert phi_L(np.zeros((3, 2)), np.ones(3), 4) == 0.0


# ----------------------------------------------------------------------------------------------
# Ongie: bounds and factorisations
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_phi3_between_lemma38_and_thm39(seed):
    rng = np.random.default_rng(100 + seed)
    K, d = 8, 3 + seed
    W, a = rng.normal(size=(K, d)), rng.normal(size=K)
    phi3 = phi_L(W, a, 3)
    upper = phi3_upper_bound(W, a)
    lb_random = phi3_lower_bound(W, a, rng.normal(size=(K, d)))  # any Q, rescaled to ‖Q‖₂ ≤ 1
    lb_best = phi3_lower_bound(W, a)
    assert lb_random <= lb_best + 1e-12
    assert lb_best <= phi3 + 1e-10
    assert phi3 <= upper + 1e-10
    # Strong duality (proof of Lemma 3.8): the best Q closes the gap.
    assert lb_best == pytest.approx(phi3, abs=1e-8)
    # Upper bound eqs. (19a) and (19b) agree.
    U, s, Vt = np.linalg.svd(W, full_matrices=False)
    eq19a = np.sum((s * np.sum(np.abs(a[:, None] * U), axis=0)) ** (2 / 3))
    assert upper == pytest.approx(eq19a, rel=1e-12)


def test_phi3_bounds_tight_on_prop35():
    rng = np.random.default_rng(7)
    V = _orthonormal(rng, 3, 4)
    cluster = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2])  # distinct cluster sizes: the SVD basis is V
    W = rng.choice([-1.0, 1.0], size=cluster.size)[:, None] * V[cluster]
    a = rng.normal(size=cluster.size)
    exact = sum(np.sum(np.abs(a[cluster == j])) ** (2 / 3) for j in range(3))
    assert phi3_upper_bound(W, a) == pytest.approx(exact, abs=1e-10)
    assert phi3_lower_bound(W, a) == pytest.approx(exact, abs=1e-8)


@pytest.mark.parametrize("L", [2, 3, 4])
def test_phi_below_CL_for_factored_networks(L):
    rng = np.random.default_rng(200 + L)
    d, widths, K = 3, [4, 5, 4][: L - 2], 6
    for _ in range(3):
        dims = [d] + widths + [K]
        Ws = [rng.normal(size=(dims[i + 1], dims[i])) for i in range(L - 1)]
        a = rng.normal(size=K)
        W = effective_matrix(Ws)
        assert W.shape == (K, d)
        phi = phi_L(W, a, L)
        # C_L ≥ min over factorisations (eq. 10) ≥ Φ_L (eq. 11 / Lemma 3.4).
        assert _min_factorisation_cost(W, a, L) <= cost_CL(Ws, a) + 1e-12
        assert phi <= _min_factorisation_cost(W, a, L) + 1e-12


@pytest.mark.parametrize("L", DEPTHS)
def test_balanced_factorisation_attains_phi(L):
    rng = np.random.default_rng(300 + L)
    W, a = rng.normal(size=(7, 3)), rng.normal(size=7)
    Ws, a_new, scale = _balanced_factorisation(W, a, L)
    assert len(Ws) == L - 1
    We = effective_matrix(Ws)
    # Same function: a'_k w'_k = a_k w_k (biases would be rescaled by the unit scale).
    np.testing.assert_allclose(a_new[:, None] * We, a[:, None] * W, atol=1e-12)
    np.testing.assert_allclose(We, scale[:, None] * W, atol=1e-12)
    assert cost_CL(Ws, a_new) == pytest.approx(phi_L(W, a, L), abs=1e-10)
    # Balanced: every layer has the same squared norm, equal to ‖a'‖².
    norms = [np.sum(Wi**2) for Wi in Ws] + [a_new @ a_new]
    np.testing.assert_allclose(norms, norms[0], rtol=1e-10)


def test_cost_CL_and_schatten_hand_examples():
    Ws = [np.array([[1.0, 2.0]]), np.array([[3.0]])]
    assert cost_CL(Ws, np.array([2.0])) == pytest.approx((4 + 5 + 9) / 3)
    np.testing.assert_allclose(effective_matrix(Ws), [[3.0, 6.0]])
    M = np.diag([4.0, 1.0, 0.0])
    assert schatten_cost(singular_values(M), 2) == pytest.approx(5.0)  # ‖M‖_{S_1}
    assert schatten_cost(singular_values(M), 4) ** 2 == pytest.approx(9.0)  # ‖M‖_{S_1/2}
    value, lam = phi_L_solve(M, np.ones(3), 3)
    assert lam[2] == 0 and lam[:2].min() > 0 and np.linalg.norm(lam) == pytest.approx(1.0)
    assert value == pytest.approx(phi_L(M[:2], np.ones(2), 3), abs=1e-12)  # the dead unit changes nothing


# ----------------------------------------------------------------------------------------------
# Savarese §3: univariate costs and minimum-cost interpolation
# ----------------------------------------------------------------------------------------------


def _rbar(w, b, a, c: float = 0.0) -> float:
    """R̄ of the two-layer net Σ_k a_k[w_k x + b_k]₊ + c, read off its exact function."""
    w, a = np.asarray(w, dtype=float), np.asarray(a, dtype=float)
    return deep_relu_net_1d_function([w[:, None], a[None, :]], [b, [c]]).rbar()


def test_two_layer_rbar_hand_example():
    # f = 2[x]₊ − [−x + 1]₊ + 3[2x − 4]₊ + [−2x + 4]₊ + 7[5]₊ + 0.5x + 1, units: (w, b, a) = (1, 0, 2): kink 0, jump +2;  (−1, 1, −1): kink 1, jump −1;
    # (2, −4, 3): kink 2, jump +6;  (−2, 4, 1): kink 2, jump +2 (merged with the previous: +8);
    # (0, 5, 7): constant 35; 0.5x = 0.5[x]₊ − 0.5[−x]₊: kink 0, jumps +0.5 and −0.5 (cancelling).
    w = np.array([1.0, -1.0, 2.0, -2.0, 0.0, 1.0, -1.0])
    b = np.array([0.0, 1.0, -4.0, 4.0, 5.0, 0.0, 0.0])
    a = np.array([2.0, -1.0, 3.0, 1.0, 7.0, 0.5, -0.5])
    f = deep_relu_net_1d_function([w[:, None], a[None, :]], [b, np.array([1.0])], knot_tol=1e-9)
    np.testing.assert_allclose(f.knots, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(f.jumps, [2.0, -1.0, 8.0])
    # f′(−∞) = 0.5 + (−1)(−1) + 1·(−2) = −0.5 ; f′(+∞) = 0.5 + 2 + 6 = 8.5
    assert f.slopes[0] == pytest.approx(-0.5) and f.slopes[-1] == pytest.approx(8.5)
    assert f.rbar() == pytest.approx(max(11.0, 8.0))
    xs = np.linspace(-3, 5, 41)
    direct = np.maximum(np.outer(xs, w) + b, 0) @ a + 1.0
    np.testing.assert_allclose(f(xs), direct, atol=1e-12)
    # Opposite jumps at one kink cancel before absolute values: [x]₊ − [x]₊ has cost 0.
    assert _rbar([1.0, 2.0], [0.0, 0.0], [1.0, -0.5]) == 0.0
    # A pure linear function v·x costs |2v| (end-slope term); an absolute value |x| costs 2.
    assert _rbar([1.0, -1.0], [0.0, 0.0], [1.5, -1.5]) == pytest.approx(3.0)
    assert _rbar([1.0, -1.0], [0.0, 0.0], [1.0, 1.0]) == pytest.approx(2.0)


def _brute_force_27(x, y):
    """Minimise eq. (27) over (l_0, l_N) numerically."""
    l = np.diff(y) / np.diff(x)

    def obj(ends):
        s = np.concatenate([[ends[0]], l, [ends[1]]])
        return max(np.sum(np.abs(np.diff(s))), abs(ends[0] + ends[1]))

    best = min(
        (minimize(obj, x0, method="Nelder-Mead", options={"xatol": 1e-12, "fatol": 1e-12, "maxiter": 4000})
         for x0 in ([l[0], l[-1]], [0.0, 0.0], [l[0] / 2, l[-1] / 2])),
        key=lambda r: r.fun,
    )
    return best.fun


@pytest.mark.parametrize("seed", range(6))
def test_spline_min_cost_matches_interpolant(seed):
    rng = np.random.default_rng(400 + seed)
    N = rng.integers(2, 9)
    x = rng.permutation(rng.uniform(-3, 3, size=N))
    y = rng.normal(size=N) + (3.0 * x if seed % 2 else 0.0)  # odd seeds: strong trend (end-slope case)
    f = linear_spline_interpolant(x, y)
    np.testing.assert_allclose(f(x), y, atol=1e-12)
    cost = spline_min_cost(x, y)
    assert cost == pytest.approx(f.rbar(), abs=1e-12)
    assert cost == pytest.approx(_interpolated(f.knots, f.values, f.slopes[0], f.slopes[-1]).rbar(),
                                 abs=1e-12)
    xs = np.sort(x)
    assert cost == pytest.approx(_brute_force_27(xs, y[np.argsort(x)]), abs=1e-7)
    # A ReLU net realising the interpolant with C(θ) = ½(‖a‖² + ‖w‖²) = R̄ (Thm 3.1 construction).
    net = min_norm_relu_net_1d(f)
    w, b, a, c = net.W[:, 0], net.b, net.a[:, 0], float(net.c[0])
    grid = np.linspace(-6, 6, 101)
    np.testing.assert_allclose(np.maximum(np.outer(grid, w) + b, 0) @ a + c, f(grid), atol=1e-10)
    assert 0.5 * (a @ a + w @ w) == pytest.approx(cost, abs=1e-10)
    assert _rbar(w, b, a, c) == pytest.approx(cost, abs=1e-10)


def test_spline_collinear_data_hand_check():
    m, x = -2.0, np.array([0.0, 1.0, 2.5, 4.0])
    y = m * x + 1.0
    # Interior slopes all m: T = 0, |l_1 + l_{N−1}| = 2|m|, so the minimum is |m|, not the 2|m| of the line.
    assert spline_min_cost(x, y) == pytest.approx(abs(m))
    line = _interpolated(x, y, m, m)
    assert line.rbar() == pytest.approx(2 * abs(m))
    f = linear_spline_interpolant(x, y)
    assert f.slopes[0] == pytest.approx(m / 2) and f.slopes[-1] == pytest.approx(m / 2)
    assert spline_min_cost([1.0], [3.0]) == 0.0


def test_spline_v_shape_hand_check():
    # |x| through (−1, 1), (0, 0), (1, 1): T = 2, s = 0, cost 2 (the V itself, flat ends not needed).
    assert spline_min_cost([-1.0, 0.0, 1.0], [1.0, 0.0, 1.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        spline_min_cost([0.0, 0.0], [1.0, 2.0])


# ----------------------------------------------------------------------------------------------
# Savarese App. C: parallel networks and ℓ_{2/L}
# ----------------------------------------------------------------------------------------------


def _parallel_forward(Ws, alpha, X):
    """h(x) = Σ_i α_i v(𝒲_i, x) for the rows x of X (Savarese App. C, eqs. 40–42)."""
    H = np.broadcast_to(X[None], (alpha.size,) + X.shape)  # (k, N, d)
    for W in Ws:
        H = np.maximum(np.einsum("kod,knd->kno", W, H), 0.0)
    return np.einsum("k,kn->n", alpha, H[..., 0])


def _parallel_cost_CL(Ws, alpha):
    """C_L(θ) = (1/L)(‖α‖² + Σ_i Σ_l ‖W_i^{(l)}‖²_F), L = len(Ws) + 1 (Savarese App. C, eq. 43)."""
    return float((alpha @ alpha + sum(np.sum(W**2) for W in Ws)) / (len(Ws) + 1))


def _parallel_from_normalised(Ws_bar, alpha_bar):
    """w_i = sign(ᾱ_i)|ᾱ_i|^{1/L}, 𝒲_i = |ᾱ_i|^{1/L} 𝒲̄_i, with C_L = ‖ᾱ‖_{2/L}^{2/L} (Savarese eqs. 55–56, 59)."""
    r = np.abs(alpha_bar) ** (1.0 / (len(Ws_bar) + 1))
    return [W * r[:, None, None] for W in Ws_bar], np.sign(alpha_bar) * r


def _parallel_net(rng, k, m, d, L):
    shapes = [(k, m, d)] + [(k, m, m)] * (L - 3) + [(k, 1, m)]
    if L == 2:
        shapes = [(k, 1, d)]
    return [rng.normal(size=s) * rng.uniform(0.2, 3.0, size=(k, 1, 1)) for s in shapes], rng.normal(size=k)


@pytest.mark.parametrize("L", [2, 3, 4])
def test_parallel_normalisation_keeps_function_and_am_gm(L):
    rng = np.random.default_rng(500 + L)
    Ws, alpha = _parallel_net(rng, k=5, m=4, d=3, L=L)
    X = rng.normal(size=(20, 3))
    Ws_bar = [W / np.linalg.norm(W, axis=(1, 2), keepdims=True) for W in Ws]  # every layer on the unit sphere
    alpha_bar = parallel_alpha_normalised(Ws, alpha)  # the output weights that keep the function (eq. 50)
    np.testing.assert_allclose(_parallel_forward(Ws_bar, alpha_bar, X), _parallel_forward(Ws, alpha, X), atol=1e-12)
    # AM-GM (eq. 53): C_L(θ) ≥ ‖ᾱ‖_{2/L}^{2/L}, with equality for the balanced version (eqs. 55–59).
    P = l2L_quasinorm(alpha_bar, L)
    assert _parallel_cost_CL(Ws, alpha) >= P
    Wb, ab = _parallel_from_normalised(Ws_bar, alpha_bar)
    assert _parallel_cost_CL(Wb, ab) == pytest.approx(P, rel=1e-12)
    np.testing.assert_allclose(_parallel_forward(Wb, ab, X), _parallel_forward(Ws, alpha, X), atol=1e-12)
    np.testing.assert_allclose(parallel_balance(Wb, ab), 0.0, atol=1e-12)
    assert np.all(parallel_balance(Ws, alpha) > 1e-3)


def test_parallel_balance_and_active_hand_example():
    # k = 3, L = 3, m = 1, d = 1. Sub-net 0 balanced (all squared norms 4), sub-net 1 unbalanced,
    # sub-net 2 dead (all zero).
    W1 = np.array([[[2.0]], [[1.0]], [[0.0]]])
    W2 = np.array([[[-2.0]], [[4.0]], [[0.0]]])
    alpha = np.array([2.0, 1e-2, 0.0])
    gaps = parallel_balance([W1, W2], alpha)
    np.testing.assert_allclose(gaps, [0.0, (16 - 1e-4) / 16, 0.0])
    np.testing.assert_allclose(parallel_alpha_normalised([W1, W2], alpha), [8.0, 4e-2, 0.0])
    assert active_subnetworks([W1, W2], alpha) == 2
    assert active_subnetworks([W1, W2], alpha, rel_tol=1e-2) == 1
    assert l2L_quasinorm([8.0, 4e-2, 0.0], 3) == pytest.approx(4.0 + 4e-2 ** (2 / 3))


def test_phi_ignores_units_shrunk_to_underflow_by_weight_decay():
    """Units with |a_k| ~ 1e-114 and ‖w_k‖ ~ 1e-99 (long weight decay) are dead, not a crash or Φ = 0."""
    from repcost.analysis import phi_L

    rng = np.random.default_rng(3)
    W, a = rng.normal(size=(4, 3)), rng.normal(size=4)
    Wd = np.vstack([W, 1e-99 * rng.normal(size=(3, 3))])
    ad = np.concatenate([a, 1e-114 * rng.normal(size=3)])
    for L in (2, 3, 4):
        assert phi_L(Wd, ad, L) == pytest.approx(phi_L(W, a, L), rel=1e-10)
