"""Neuron groups, effective width and the merged network (Jacot et al. 2022 Prop 8 / 15 style merges)."""

import pytest
import torch

from repcost.analysis.alignment import merge_units, neuron_groups
from repcost.models.fc import FC, FCConfig


def _aligned_net(beta=1.0, seed=0):
    """depth 3, 4 distinct incoming directions per layer, each copied with positive scales, + 2 dead neurons."""
    g = torch.Generator().manual_seed(seed)
    m = FC(FCConfig(depth=3, width=14, beta=beta), 3, 2, g).double()
    with torch.no_grad():
        for l in range(2):
            w, b = m.weights[l], m.biases[l] if beta > 0 else None
            base_w = w[:4].clone()
            base_b = b[:4].clone().normal_(generator=g).abs() if beta > 0 else None  # alive on most inputs
            for k in range(12):
                s = 0.5 + torch.rand((), generator=g, dtype=torch.float64)
                w[k] = s * base_w[k % 4]
                if beta > 0:
                    b[k] = s * base_b[k % 4]
            w[12:] = 0.0  # dead: zero incoming weights and a negative bias (or zero)
            if beta > 0:
                b[12:] = -1.0
    return m, g


def test_groups_and_effective_width():
    m, g = _aligned_net()
    x = torch.randn(20, 3, dtype=torch.float64, generator=g)
    hs = m.hidden(x)
    groups, dead = neuron_groups(hs[0].pre, hs[0].post, threshold=0.999)
    assert dead == [12, 13]
    assert sorted(len(gr) for gr in groups) == [3, 3, 3, 3]
    assert all(len({k % 4 for k in gr}) == 1 for gr in groups)
    widths = [len(neuron_groups(h.pre, h.post, threshold=0.999)[0]) for h in hs]  # the effective widths
    assert widths == [4, 4]


def test_merged_network_same_outputs_lower_norm():
    """Exactly proportional groups merged in place keep the outputs on the data; rebalanced, the norm is no larger
    (the Prop 15 merge argument); merging again sets nothing more to 0."""
    import copy

    from repcost.analysis.critical import rebalance

    for beta in (1.0, 0.0):
        m, g = _aligned_net(beta=beta, seed=3)
        x = torch.randn(20, 3, dtype=torch.float64, generator=g)
        merged = copy.deepcopy(m)
        assert merge_units(merged, x, threshold=0.999) == 2 * (8 + 2)  # per layer: 4 groups of 3, 2 dead
        rebalance(merged)
        live = [int(((u.incoming > 0) | (u.outgoing > 0)).sum()) for u in merged.unit_norms()]
        assert live == [4, 4]
        assert torch.allclose(merged(x), m(x), atol=1e-9, rtol=1e-9)
        assert float(merged.param_sq_norm().detach()) < float(m.param_sq_norm().detach())
        assert merge_units(merged, x, threshold=0.999) == 0 and torch.allclose(merged(x), m(x), atol=1e-9)


def test_plateau_start():
    from repcost.analysis.alignment import plateau_start

    w = [1, 2, 5, 10, 20, 50]
    assert plateau_start(w, [5.0, 3.0, 1.5, 1.004, 1.0, 1.002], rel_tol=0.01) == 10
    assert plateau_start(w, [5.0, 3.0, 1.5, 1.004, 1.0, 1.002], rel_tol=0.003) == 20
    # a failed (high) run at a large width pushes the start past it
    assert plateau_start(w, [5.0, 3.0, 1.0, 1.0, 1.2, 1.0], rel_tol=0.01) == 50
    # log-scale band: a 10^4 drop then ±10 % wiggles is flat at 5 % of the log range (factor 10^0.2 = 1.58)
    curve = [1e3, 1e1, 0.12, 0.11, 0.1, 0.105]
    assert plateau_start(w, curve, log_frac=0.05) == 5 and plateau_start(w, curve, rel_tol=0.05) == 20


def test_optimisation_failures_and_zero_padding():
    """A wider net padded with zero units has a narrower net's objective exactly, so a higher trained loss is a failure."""
    from repcost.analysis.alignment import optimisation_failures
    from repcost.objective import objective

    assert optimisation_failures([1, 2, 15, 20, 30, 50, 100], [5, 2, 4.33e-5, 4.37e-5, 4.35e-5, 4.3e-3, 2.5e-4],
                                 rel_tol=0.05) == [50, 100]
    assert optimisation_failures([10, 5, 1], [1.0, 2.0, 3.0]) == []  # unsorted input, decreasing curve
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(30, 4, generator=g, dtype=torch.float64), torch.randn(30, 2, generator=g, dtype=torch.float64)
    narrow = FC(FCConfig(depth=3, width=3, beta=1.0), 4, 2, g).double()
    wide = FC(FCConfig(depth=3, width=5, beta=1.0), 4, 2, g).double()
    with torch.no_grad():
        for i in range(3):
            wide.weights[i].zero_(), wide.biases[i].zero_()
            r, c = narrow.weights[i].shape
            wide.weights[i][:r, :c] = narrow.weights[i]
            wide.biases[i][:r] = narrow.biases[i] + 0.1  # nonzero biases, so the pad must not leak them
            narrow.biases[i] += 0.1
    a, b = objective(narrow, x, y, "mse", 1e-2, "one"), objective(wide, x, y, "mse", 1e-2, "one")
    assert torch.allclose(torch.stack(a), torch.stack(b), rtol=1e-12, atol=0)


def test_identity_input_lower_bound():
    from repcost.analysis.alignment import identity_input_lower_bound
    from repcost.objective import objective

    g = torch.Generator().manual_seed(5)
    n, lam = 5, 0.02
    y = torch.diag(torch.tensor([3.0, 2.0, 1.0, 0.5, 0.05], dtype=torch.float64))
    lb = identity_input_lower_bound(y, lam)
    x = torch.eye(n, dtype=torch.float64)
    # attained by W_1 = W_2 = diag(sqrt((y_i − λN)_+)) (Y' diagonal, hence completely positive)
    m = FC(FCConfig(depth=2, width=n, beta=0.0), n, n, g).double()
    d = torch.sqrt(torch.clamp(torch.diagonal(y) - lam * n, min=0))
    with torch.no_grad():
        m.weights[0].copy_(torch.diag(d))
        m.weights[1].copy_(torch.diag(d))
    assert float(objective(m, x, y, "mse", lam, "one")[0].detach()) == pytest.approx(lb, rel=1e-12)
    for seed in range(5):  # and never beaten by any other network
        r = FC(FCConfig(depth=2, width=7, beta=0.0), n, n, torch.Generator().manual_seed(seed)).double()
        assert float(objective(r, x, y, "mse", lam, "one")[0].detach()) >= lb


@pytest.mark.slow
def test_identity_input_min_cost_drops_to_n_squared_at_the_cp_rank():
    """Prop 14 / Remark 23 for K_{3,3}: R_n(I_6, EᵀE) = N² = 36 once n ≥ N²/4 = 9, strictly more at n = 8."""
    from repcost.analysis.alignment import identity_input_lower_bound, identity_input_min_cost
    from repcost.data.bipartite import bipartite_incidence

    e4 = bipartite_incidence(4)
    assert abs(identity_input_min_cost(e4.T @ e4, 4, restarts=2) - 16.0) < 1e-3  # CP-rank 4 = N: N² already
    e = bipartite_incidence(6)
    y = e.T @ e
    at9, at8 = identity_input_min_cost(y, 9, restarts=2), identity_input_min_cost(y, 8, restarts=2)
    assert abs(at9 - 36.0) < 1e-3
    assert at8 > 36.0 * 1.003  # one neuron short of the CP-rank costs measurably more (≈ +0.4 %)
    # consistent with the convex bound: λ·R_n ≥ bound(λ) for any width (Y' = Y is feasible)
    assert 1e-3 * at9 >= identity_input_lower_bound(y, 1e-3)
    with pytest.raises(ValueError, match="width >= N"):
        identity_input_min_cost(y, 5)
