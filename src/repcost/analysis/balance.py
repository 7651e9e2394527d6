"""Balancedness of weight-decay critical points (Jacot 2023 Prop 12 and Remark 6; deep linear nets).

Every statement here comes from a rescaling that leaves the network function unchanged: at a
critical point of  data-loss(f_θ) + λ·s·Σ_{p regularised}‖p‖²  the derivative of the penalty
along that rescaling must vanish, which equates two squared norms. λ and s never enter, only
*which* parameters are regularised (the model says so). Gaps are relative, |u − v| / max(u, v)
in [0, 1], and 0 when u = v = 0.

* Layer-wise (Jacot 2023 Prop 12). Scaling W_ℓ ↦ c_ℓ W_ℓ and b_ℓ ↦ c_1⋯c_ℓ b_ℓ with
  Π c_ℓ = 1 keeps f for positively homogeneous σ_a. At a critical point every
  ∂_{c_ℓ}‖θ‖² = 2(‖W_ℓ‖²_F + ‖b_ℓ‖² + ⋯ + ‖b_L‖²) is equal, and consecutive differences give
      ‖W_ℓ‖²_F + ‖b_ℓ‖² = ‖W_{ℓ+1}‖²_F,        ℓ = 1 … L−1,
  with b_ℓ the *stored* bias parameter (the one the penalty sees). In our β-parametrisation
  α_ℓ = W_ℓ α_{ℓ−1} + β b_ℓ the effective bias βb_ℓ scales like b_ℓ, so β does not appear
  (in terms of the effective bias the term is ‖βb_ℓ‖²/β²). Biases that are not regularised
  (Ongie, Savarese, `bias_regularised: false`) drop out: ‖W_ℓ‖²_F = ‖W_{ℓ+1}‖²_F.
* Neuron-wise (Jacot 2023 Remark 6; Ongie & Willett §3 diagonal rescaling). Scaling unit i of
  a homogeneous hidden layer ℓ — incoming row W_ℓ[i, :] and its bias b_ℓ[i] by c, outgoing
  column W_{ℓ+1}[:, i] by 1/c — keeps f, so
      ‖W_ℓ[i, :]‖² + b_ℓ[i]² (iff biases regularised) = ‖W_{ℓ+1}[:, i]‖².
  Summing over i recovers Prop 12 for that pair, so neuron balance is the stronger notion.
* Linear layers (deep linear nets). Between two linear layers of linear_relu any invertible G
  acts (W_ℓ ↦ G W_ℓ, W_{ℓ+1} ↦ W_{ℓ+1} G⁻¹) and the critical-point condition is
      W_ℓ W_ℓᵀ = W_{ℓ+1}ᵀ W_{ℓ+1}.
  Between the last linear layer W_{L−1} and the ReLU output weights a only positive diagonal
  G act (ReLU is homogeneous, not linear), so only the diagonals must agree:
  diag(W_{L−1}W_{L−1}ᵀ) = diag(aᵀa), i.e. the ReLU layer's neuron balance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .family_costs import family_gaps
from .arrays import as_f64, float64_model


def relative_gap(u, v):
    """|u − v| / max(|u|, |v|), 0 where both are 0 (the balancedness gap used throughout; Jacot 2023 Prop 12)."""
    u, v = as_f64(u), as_f64(v)
    top = np.maximum(np.abs(u), np.abs(v))
    g = np.where(top > 0, np.abs(u - v) / np.where(top > 0, top, 1.0), 0.0)
    return float(g) if np.ndim(g) == 0 else g


@dataclass
class Balance:
    """One balance statement of layer ℓ: its sides u (incoming) and v (outgoing) and their gap, as the function that
    made it (layer_balance, neuron_balance, linear_layer_balance) defines them."""

    layer: int
    u: Any
    v: Any
    gap: Any
    diag_only: bool = False


def layer_balance(model) -> list[Balance]:
    """Per consecutive layer pair, ‖W_ℓ‖²_F + ‖b_ℓ‖² vs ‖W_{ℓ+1}‖²_F and their relative gap (Jacot 2023 Prop 12).

    b_ℓ is the stored (regularised) bias of fc, independent of β; families whose biases are not
    regularised (linear_relu, parallel, fc with bias_regularised false) compare weights only.
    For parallel the stacked sub-network layers are summed over sub-networks (layer L = α);
    the per-sub-network statement is sparsity.parallel_balance (Savarese Cor C.2).
    """
    terms = [(float(as_f64(w)), float(as_f64(b))) for w, b in float64_model(model).layer_sq_norms()]
    pairs = [(ell, w + b, v) for ell, ((w, b), (v, _)) in enumerate(zip(terms, terms[1:]), 1)]
    return [Balance(ell, u, v, relative_gap(u, v)) for ell, u, v in pairs]


def neuron_balance(model) -> list[Balance]:
    """Per homogeneous hidden unit, incoming vs outgoing squared weight norms and their relative gap (Jacot 2023 Remark 6).

    fc: every hidden layer ℓ = 1 … L−1, incoming = row i of W_ℓ plus b_ℓ[i]² when biases are
    regularised (the stored b, so β does not enter), outgoing = column i of W_{ℓ+1}.
    linear_relu: only the ReLU layer (ℓ = L−1): incoming = row k of the last linear layer
    W_{L−1} (not of the effective matrix: the per-unit rescaling acts on W_{L−1}'s row, b_k and
    a's column k, and the penalty sees ‖W_{L−1}[k,:]‖², not ‖W[k,:]‖²), outgoing = column k of a;
    b is free. The linear layers' (stronger) balance is linear_layer_balance.
    parallel: every sub-network hidden layer; the last (one unit per sub-network) has outgoing
    ‖α[:, i]‖² (Savarese App. C). u and v are arrays, one entry per unit in `model.hidden(x)[ℓ−1]` column order
    (for parallel, sub-network i's unit j is entry i·n_ℓ + j).
    """
    units = [(u.layer, as_f64(u.incoming).reshape(-1), as_f64(u.outgoing).reshape(-1))
             for u in float64_model(model).unit_norms()]
    return [Balance(ell, u, v, relative_gap(u, v)) for ell, u, v in units]


def linear_layer_balance(model) -> list[Balance]:
    """linear_relu: ‖W_ℓW_ℓᵀ − W_{ℓ+1}ᵀW_{ℓ+1}‖_F / max of the two norms, the deep-linear-net balancedness at weight-decay critical points (Ongie & Willett §3 architecture).

    Pairs ℓ = 1 … L−2 are linear-linear and compare full matrices. The last pair (W_{L−1}, a)
    straddles the ReLU layer, where only positive diagonal rescalings are symmetries, so it
    compares diag(W_{L−1}W_{L−1}ᵀ) with diag(aᵀa) (diag_only=True); for L = 2 it is the only pair.
    """
    out = []
    for ell, W, V, diag_only in float64_model(model).linear_pairs():
        W, V = as_f64(W), as_f64(V)
        if diag_only:
            A, B = np.sum(W ** 2, axis=1), np.sum(V ** 2, axis=0)  # diag(W_ℓW_ℓᵀ), diag(W_{ℓ+1}ᵀW_{ℓ+1})
        else:
            A, B = W @ W.T, V.T @ V
        top = max(np.linalg.norm(A), np.linalg.norm(B))
        out.append(Balance(ell, A, B, float(np.linalg.norm(A - B) / top) if top > 0 else 0.0, diag_only))
    return out


def _max_mean(prefix: str, gaps) -> dict:
    g = np.concatenate([np.zeros(0)] + [np.atleast_1d(as_f64(x)).ravel() for x in gaps])
    return {f"{prefix}_gap_max": float(g.max()), f"{prefix}_gap_mean": float(g.mean())} if g.size else {}


def balance_summary(model) -> dict[str, float]:
    """Max and mean relative balancedness gaps as scalars for summary.json (Jacot 2023 Prop 12, Remark 6; Savarese Cor C.2).

    Keys: layer_gap_{max,mean} (layer_balance), neuron_gap_{max,mean} (pooled over all units of
    neuron_balance); linear_relu adds linear_gap_{max,mean} (linear_layer_balance); parallel adds
    subnet_gap_{max,mean} (sparsity.parallel_balance, with α_i² read as ‖α[:, i]‖² when d_out > 1).
    """
    model = float64_model(model)  # one float64 copy (if any) for every gap below
    na = not_applicable(model)
    out = {}
    for name, gaps in (("layer", layer_balance), ("neuron", neuron_balance), ("linear", linear_layer_balance)):
        if f"{name}_gap" not in na:
            out.update(_max_mean(name, [b.gap for b in gaps(model)]))
    for name, gaps in family_gaps(model).items():
        out.update(_max_mean(name, [gaps]))
    return out


def not_applicable(model) -> dict[str, str]:
    """The balance statements whose symmetry the model does not declare (models/base.py Structure), with why."""
    st, out = model.structure, {}
    if not st.positively_homogeneous:
        why = f"the {model.family} family's activation is not positively homogeneous"
        return {"layer_gap": why, "neuron_gap": why}
    if not st.layer_rescaling:
        out["layer_gap"] = f"the {model.family} family declares no layer rescaling symmetry (Jacot 2023 Prop 12)"
    if not st.unit_rescaling:
        out["neuron_gap"] = f"the {model.family} family declares no per-unit rescaling symmetry (Jacot 2023 Remark 6)"
    return out
