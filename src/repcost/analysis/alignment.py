"""Neuron alignment, effective width and the merged (pruned) network (Jacot et al. 2022 §3.1, Prop 8, Prop 15).

With a positively homogeneous σ, neurons k, k' of a layer whose pre-activation vectors over the
data are positively proportional (Z_{ℓ,k'} = c·Z_{ℓ,k}, c > 0) also have proportional
post-activations, so they act as ONE neuron on the data. `neuron_groups` finds such groups
(cosine of the pre-activation vectors above a threshold; neurons whose post-activation is ~0 on
every data point are 'dead'); the number of groups is the layer's effective width.

`merge_units` makes each group one neuron in place (the others and the dead set to 0) with the same outputs
on the data (exactly, when the groups are exactly proportional) and, once rebalanced, a squared norm no larger
than the original: for a group G with representative r, Z_k = c_k Z_r and outgoing columns v_k, the
representative's outgoing ṽ = Σ_{k∈G} c_k v_k with its incoming u_r; balanced, its cost 2‖ṽ‖‖u_r‖ ≤
Σ 2‖v_k‖‖c_k u_r‖ = Σ 2‖v_k‖‖u_k‖ ≤ Σ(‖v_k‖² + ‖u_k‖²) where u_k = c_k u_r (as after training with weight
decay, whose incoming rows lie in the data's span), the Prop 15 merge argument in any dimension.
Samples are rows here (N × n); Z_ℓ of the paper is the transpose.
"""

from __future__ import annotations

import itertools

import torch



def neuron_groups(pre: torch.Tensor, post: torch.Tensor, threshold: float = 0.99,
                  dead_tol: float = 1e-6) -> tuple[list[list[int]], list[int]]:
    """(groups, dead) of the neurons (columns) of an N × n pre-activation matrix and its post-activation.

    dead: neurons whose post-activation norm over the data is ≤ dead_tol × the largest one. The others
    are grouped greedily, largest norm first: a neuron joins the first group whose representative has
    cosine > threshold with it (positive proportionality).
    """
    pre, post = pre.detach().to(torch.float64), post.detach().to(torch.float64)
    pn = post.norm(dim=0)
    dead = [int(k) for k in torch.nonzero(pn <= dead_tol * max(float(pn.max()), 1e-300)).flatten()]
    alive = [k for k in torch.argsort(pre.norm(dim=0), descending=True).tolist() if k not in set(dead)]
    unit = pre / pre.norm(dim=0).clamp_min(1e-300)
    groups: list[list[int]] = []
    for k in alive:
        for g in groups:
            if float(unit[:, g[0]] @ unit[:, k]) > threshold:
                g.append(k)
                break
        else:
            groups.append([k])
    return groups, sorted(dead)


def merge_units(model, x: torch.Tensor, threshold: float, dead_tol: float = 1e-6) -> int:
    """In place, layer by layer (input side first): each group of aligned units (`neuron_groups` at `threshold` and
    `dead_tol`) made one, and the dead ones set to 0. The representative r keeps its incoming weights and takes
    Σ_k c_k v_k as its outgoing ones (Z_k ≈ c_k Z_r, least squares); the others are set to 0. An exactly proportional
    group keeps the function on the data (σ(cz) = cσ(z)), and after `analysis.critical.rebalance` a norm no larger
    (module docstring); a group at cosine < 1 changes the function by what its misalignment allows. Returns the
    units set to 0."""
    Ws, bs = model.weight_matrices(), model.bias_vectors()
    if not (model.structure.chain and model.structure.positively_homogeneous and all(W.dim() == 2 for W in Ws)):
        raise ValueError(f"merging units needs a chain of weight matrices and a positively homogeneous activation "
                         f"(the {model.family} family is not)")
    merged = 0
    with torch.no_grad():
        for ell in range(1, len(Ws)):
            h = model.hidden(x)[ell - 1]  # after the layers below have merged
            groups, dead = neuron_groups(h.pre, h.post, threshold, dead_tol)
            gone = [k for k in dead + [k for g in groups for k in g[1:]] if Ws[ell][:, k].any() or Ws[ell - 1][k].any()]
            for r, *rest in groups:
                for k in rest:
                    Ws[ell][:, r] += float(h.pre[:, k] @ h.pre[:, r] / (h.pre[:, r] @ h.pre[:, r])) * Ws[ell][:, k]
            Ws[ell][:, gone], Ws[ell - 1][gone] = 0.0, 0.0
            for b in bs[ell - 1:ell]:
                b[gone] = 0.0
            merged += len(gone)
    return merged


def plateau_start(widths, values, rel_tol: float = 0.01, log_frac: float | None = None):
    """Start of the loss plateau of a (width, minimal loss) curve (Jacot et al. 2022 §4, Fig 2).

    The smallest width w such that every width w' ≥ w in the sweep has a loss within rel_tol of the
    best loss over all widths: value(w') ≤ (1 + rel_tol) · min(values). With log_frac, the band is
    relative to the curve's range on a log scale instead (how a log-scale plot like the paper's Fig 2
    reads): log value(w') − log min ≤ log_frac · (log max − log min). None if the sweep is empty.
    """
    pairs = sorted((float(w), float(v)) for w, v in zip(widths, values))
    if not pairs:
        return None
    best = min(v for _, v in pairs)
    limit = (1 + rel_tol) * best if log_frac is None else best * (max(v for _, v in pairs) / best) ** log_frac
    plateau = [w for w, _ in itertools.takewhile(lambda p: p[1] <= limit, reversed(pairs))]  # widest first
    start = plateau[-1] if plateau else None
    return int(start) if start is not None and start == int(start) else start


def optimisation_failures(widths, values, rel_tol: float = 0.01) -> list:
    """Widths whose loss exceeds (1 + rel_tol) × the best loss at a narrower width.

    The minimal regularised loss cannot grow with width (Jacot et al. 2022 §4): a narrower net padded with
    zero units computes the same function at the same parameter norm. A trained net above a narrower
    one's loss has therefore not reached its minimum.
    """
    out, best = [], float("inf")
    for w, v in sorted((float(w), float(v)) for w, v in zip(widths, values)):
        if v > (1 + rel_tol) * best:
            out.append(int(w) if w == int(w) else w)
        best = min(best, v)
    return out


def identity_input_lower_bound(y: torch.Tensor, lam: float) -> float:
    """A width-independent lower bound on min_W (1/N)‖σ(W_1)ᵀW_2ᵀ − Y‖²_F + λ(‖W_1‖² + ‖W_2‖²) for a
    shallow bias-free net with X = I_N (the setting of Jacot et al. 2022 Prop 14; rows of y = samples).

    ‖W_1‖² + ‖W_2‖² ≥ ‖σ(W_1)‖² + ‖W_2‖² ≥ 2‖W_2σ(W_1)‖_*, so the minimum is at least
    min_{Y'} (1/N)‖Y' − Y‖² + 2λ‖Y'‖_*, solved by soft-thresholding the singular values s_i of Y at
    λN: Σ_i (1/N)·min(s_i, λN)² + 2λ·(s_i − λN)_+. It is attained (by Prop 14's argument) when the
    shrunk Y' is completely positive and the width is at least its CP-rank.
    """
    n = y.shape[0]
    s = torch.linalg.svdvals(y.to(torch.float64))
    t = lam * n
    return float((torch.clamp(s, max=t) ** 2).sum() / n + 2 * lam * torch.clamp(s - t, min=0).sum())


def identity_input_min_cost(y: torch.Tensor, width: int, restarts: int = 20, seed: int = 0) -> float:
    """min ‖W_1‖² + ‖W_2‖² over width-n bias-free shallow ReLU nets with W_2σ(W_1) = Yᵀ (X = I_N, rows of y = samples).

    The representation cost R_n(I_N, Y) of Jacot et al. 2022 Prop 14 (App. D.1 proof): with A = σ(W_1) ≥ 0
    (n × N) and K = AᵀA, the cheapest W_2 = Yᵀ A⁺ gives R_n = min_{A ≥ 0} Tr K + Tr[Y Yᵀ K⁻¹], a CP
    factorisation problem; its minimum drops to 2‖Y‖_* = 2 Tr (YᵀY)^{1/2} once n reaches the CP-rank
    of (YᵀY)^{1/2}. Solved by scipy L-BFGS-B over A ≥ 0 from up to `restarts` random starts (needs n ≥ N),
    stopping early once a start reaches that lower bound 2‖Y‖_* (to 1e-4): then it is the global minimum.
    """
    import numpy as np
    from scipy.optimize import minimize

    yy = (y.to(torch.float64) @ y.to(torch.float64).T).numpy()
    n_pts = yy.shape[0]
    if width < n_pts:
        raise ValueError(f"identity_input_min_cost needs width >= N = {n_pts} (K = AᵀA invertible), got {width}")

    def cost(a):
        A = a.reshape(width, n_pts)
        ev, vec = np.linalg.eigh(A.T @ A)
        if ev[0] <= 1e-10 * max(ev[-1], 1e-300):  # K (near-)singular: Y is out of reach, the cost is +∞
            return 1e300, np.zeros_like(a)
        k_inv = (vec / ev) @ vec.T
        value = float(np.sum(A * A) + np.trace(yy @ k_inv))
        return value, (2 * A - 2 * A @ k_inv @ yy @ k_inv).ravel()  # d/dA of Tr K and of Tr[YYᵀK⁻¹]

    gen = np.random.default_rng(seed)
    scale = float(np.sqrt(np.trace(yy) ** 0.5 / (width * n_pts)) + 1e-12) * 2
    floor = 2 * float(torch.linalg.svdvals(y.to(torch.float64)).sum())  # R_n ≥ 2‖Y‖_* at any width
    best = np.inf
    for _ in range(restarts):
        if best <= floor * (1 + 1e-4):
            break
        a0 = np.abs(gen.standard_normal(width * n_pts)) * scale
        res = minimize(cost, a0, jac=True, method="L-BFGS-B", bounds=[(0, None)] * a0.size,
                       options={"maxiter": 5000, "ftol": 1e-12, "gtol": 1e-8})
        best = min(best, float(res.fun))
    return best
