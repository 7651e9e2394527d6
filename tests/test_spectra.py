"""Spectra and rank measures: known ranks of hand-built matrices and representations (Jacot 2023 Fig 1A)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from repcost.analysis.spectra import (
    entropy_rank,
    hidden_spectra,
    normalised,
    numerical_rank,
    rank_measures,
    singular_values,
    stable_rank,
    weight_spectra,
)
from repcost.models import MODELS, build_model


def model(family, d_in=4, d_out=3, seed=0, **kw):
    return build_model(MODELS.get(family).schema(**kw), d_in, d_out, seed)


def rank_r(m, n, r, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, r)) @ rng.standard_normal((r, n))


# --- rank functions on arrays -------------------------------------------------------------


def test_singular_values_numpy_and_torch_agree_descending():
    A = rank_r(7, 5, 5)
    s_np, s_t = singular_values(A), singular_values(torch.tensor(A, dtype=torch.float32))
    assert s_np.dtype == np.float64 and s_t.dtype == np.float64
    assert np.all(np.diff(s_np) <= 0)
    np.testing.assert_allclose(s_t, s_np, rtol=1e-5)
    np.testing.assert_allclose(np.sort(s_np ** 2)[::-1], np.sort(np.linalg.eigvalsh(A.T @ A))[::-1], rtol=1e-10)


@pytest.mark.parametrize("r", [0, 1, 2, 4])
def test_numerical_rank_of_rank_r_matrix(r):
    s = singular_values(rank_r(20, 9, r) if r else np.zeros((20, 9)))
    assert numerical_rank(s) == r
    assert isinstance(numerical_rank(s), int)


def test_rank_measures_closed_forms():
    n = 6
    s = singular_values(np.eye(n))
    assert stable_rank(s) == pytest.approx(n)
    assert entropy_rank(np.full(n, 3.7)) == pytest.approx(n)
    assert entropy_rank(np.array([2.0, 0, 0])) == pytest.approx(1.0)
    assert stable_rank(np.array([2.0, 1.0])) == pytest.approx(1.25)
    # all-zero spectra are safe
    z = np.zeros(4)
    assert (numerical_rank(z), stable_rank(z), entropy_rank(z)) == (0, 0.0, 0.0)
    np.testing.assert_array_equal(normalised(z), z)
    np.testing.assert_allclose(normalised([4.0, 2.0, 1.0]), [1.0, 0.5, 0.25])


def test_rank_measures_batched_match_rowwise():
    S = np.stack([singular_values(rank_r(10, 6, r, seed=r)) for r in (1, 3, 6)])
    batched = rank_measures(S)
    for i in range(3):
        for k, v in rank_measures(S[i]).items():
            assert batched[k][i] == pytest.approx(v)
    np.testing.assert_array_equal(batched["numerical_rank"], [1, 3, 6])


def test_gap_rank_finds_the_largest_drop():
    from repcost.analysis.spectra import gap_rank
    assert gap_rank([4.0, 3.0, 2.0, 0.2, 0.1]) == (3, pytest.approx(0.1))
    assert gap_rank(np.array([1.0, 0.9, 0.8, 0.7, 0.6, 0.45, 0.05, 0.04])) == (6, pytest.approx(0.05 / 0.45))
    # unsorted input is sorted (5, 1, 1, 1, …, 1e-3); only s_1 … s_4 count, so the drop at the end is not seen
    assert gap_rank([5.0, 1e-3] + [1.0] * 20, max_rank=3) == (1, pytest.approx(0.2))
    assert gap_rank([0.0, 0.0])[0] == 0 and gap_rank([2.0])[0] == 1


def test_numerical_rank_tolerance():
    s = np.array([1.0, 1e-2, 1e-4])
    assert numerical_rank(s) == 2 and numerical_rank(s, rel_tol=1e-5) == 3 and numerical_rank(s, 0.1) == 1


# --- representations -----------------------------------------------------------------------


def test_hidden_spectra_rank_two_linear_layer():
    m = model("linear_relu", d_in=6, d_out=2, depth=3, width=12, linear_width=8)
    with torch.no_grad():
        m.linear[0].copy_(torch.tensor(rank_r(8, 6, 2)))
        m.b.copy_(torch.randn(12, dtype=torch.float64))
    x = torch.randn(200, 6, dtype=torch.float64)
    recs = hidden_spectra(m, x, which="both")
    assert [(r["layer"], r["which"]) for r in recs] == [(1, "pre"), (1, "post"), (2, "pre"), (2, "post")]
    assert recs[0]["numerical_rank"] == 2 and recs[1]["numerical_rank"] == 2  # W_1 x: rank 2
    assert recs[2]["numerical_rank"] == 2  # W_2 W_1 x + b, centred: rank 2 (the bias is removed)
    assert recs[3]["numerical_rank"] > 2  # the ReLU raises the rank
    # uncentred, the bias adds one direction to the pre-activation
    assert hidden_spectra(m, x, centred=False, which="pre")[1]["numerical_rank"] == 3
    assert recs[0]["s"].shape == (8,) and recs[2]["width"] == 12


def test_hidden_spectra_default_post():
    m = model("fc", depth=4, width=10)
    x = np.random.default_rng(0).standard_normal((50, 4))
    recs = hidden_spectra(m, x)
    assert [r["layer"] for r in recs] == [1, 2, 3] and all(r["which"] == "post" for r in recs)
    assert set(recs[0]) >= {"layer", "which", "s1", "numerical_rank", "stable_rank", "entropy_rank", "s"}
    with pytest.raises(ValueError):
        hidden_spectra(m, x, which="mid")


def test_hidden_spectra_parallel_stacks_subnetworks():
    m = model("parallel", d_in=3, d_out=1, depth=3, n_subnets=4, width=5)
    recs = hidden_spectra(m, torch.randn(30, 3, dtype=torch.float64))
    assert [r["width"] for r in recs] == [20, 4]


def test_weight_spectra_families():
    m = model("linear_relu", d_in=5, d_out=1, depth=4, width=9, linear_width=7)
    with torch.no_grad():
        m.linear[1].copy_(torch.tensor(rank_r(7, 7, 3)))
    recs = weight_spectra(m)
    assert [r["name"] for r in recs] == ["W1", "W2", "W3", "a", "W_eff"]
    eff = recs[-1]
    assert eff["s"].shape == (5,) and eff["numerical_rank"] == 3  # W_3 W_2 W_1 through a rank-3 W_2
    np.testing.assert_allclose(eff["s"], singular_values(m.effective_matrix()), rtol=1e-12, atol=1e-12 * eff["s"][0])

    p = model("parallel", d_in=3, d_out=2, depth=3, n_subnets=4, width=5)
    precs = weight_spectra(p)
    assert [r["name"] for r in precs] == ["W1", "W2", "alpha"]
    assert precs[0]["s"].shape == (4, 3) and precs[0]["numerical_rank"].shape == (4,)
    assert precs[2]["s"].shape == (2,)


def test_float32_model_gives_float64_results():
    m = model("fc", depth=3, width=8, slope=0.2)
    m32 = copy.deepcopy(m).float()
    x = torch.randn(40, 4, dtype=torch.float64)
    for a, b in zip(hidden_spectra(m, x, which="both"), hidden_spectra(m32, x, which="both")):
        assert b["s"].dtype == np.float64
        np.testing.assert_allclose(b["s"], a["s"], rtol=1e-5, atol=1e-6 * a["s"][0])
    for a, b in zip(weight_spectra(m), weight_spectra(m32)):
        assert b["s"].dtype == np.float64
        np.testing.assert_allclose(b["s"], a["s"], rtol=1e-5)
    assert next(m32.parameters()).dtype == torch.float32  # the caller's model is untouched
