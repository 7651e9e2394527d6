"""Low-rank true function f* = h∘g with inner dimension k (Jacot 2023, Fig 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from ..analysis.spectra import numerical_rank
from ..errors import check
from ..registry import DATASETS
from .bundle import DataBundle, check_shared, function_bundle, gaussian, rng
from .teacher import random_relu_net, relu_net_forward


@dataclass
class RankKConfig:
    name: str = "rank_k"
    seed: int = 0  # data seed (inputs, label noise), independent of the training seed
    teacher_seed: int = 0  # seed of the random nets g and h
    d_in: int = 50  # input dimension
    d_out: int = 50  # output dimension
    k: int = 5  # inner (bottleneck) dimension: Jacobian rank and BN-rank of f* are <= k
    hidden: int = 50  # hidden width of g and h (each one ReLU layer, linear output)
    g_hidden: Optional[int] = None  # hidden width of g (None: `hidden`; 0: g is a random linear projection)
    beta: float = 0.0  # bias amount β of g and h (0 = no bias)
    bottleneck: str = "linear"  # "linear": g(x) as is; "relu": the inner k-vector is ReLU(g(x) + shift), a hidden ReLU layer
    bottleneck_shift: float = 0.0  # shift added to g(x) before that ReLU (only with bottleneck = relu)
    n_train: int = 2000  # training inputs x ~ N(0, I_d_in)
    n_test: int = 500  # test inputs (0 = no test split); test targets are noiseless
    noise: float = 0.0  # std of Gaussian noise added to the training targets

    def __post_init__(self):
        check_shared(self)
        check(self.d_in >= 1, "d_in", self.d_in, "an integer >= 1")
        check(self.d_out >= 1, "d_out", self.d_out, "an integer >= 1")
        check(1 <= self.k, "k", self.k, "an integer >= 1")
        check(self.hidden >= 1, "hidden", self.hidden, "an integer >= 1")
        check(self.g_hidden is None or self.g_hidden >= 0, "g_hidden", self.g_hidden,
              "null (same as hidden), 0 (linear g) or an integer >= 1")
        check(self.bottleneck in ("linear", "relu"), "bottleneck", self.bottleneck, "linear or relu")
        check(self.bottleneck_shift == 0 or self.bottleneck == "relu", "bottleneck_shift", self.bottleneck_shift,
              "0 unless bottleneck = relu (a shift of a linear bottleneck is only a bias of h)")


def rank_k_function(cfg: RankKConfig) -> Callable[[torch.Tensor], torch.Tensor]:
    """f* = h∘g with g: R^d_in→R^k, h: R^k→R^d_out random one-hidden-layer ReLU nets (Jacot 2023 Fig 1).

    The bottleneck g(x) ∈ R^k is linear in the last ReLU layer, so Jf*(x) = Jh(g(x))·Jg(x) has
    rank ≤ k and RankBN(f*) ≤ k (Jacot 2023 Def. 2). With g_hidden = 0, g is a random linear
    projection (f* = h(Px), a k-index model), which N = 2000 samples in 50-D can identify.
    With bottleneck = relu, f* = h(ReLU(g(x) + shift)): the inner vector is nonnegative, so a deep
    ReLU net can pass it through identity layers without clipping it (rank and BN-rank still ≤ k).
    """
    gen = rng(cfg.teacher_seed, 0)
    g_hidden = cfg.hidden if cfg.g_hidden is None else cfg.g_hidden
    g = random_relu_net([cfg.d_in, *([g_hidden] if g_hidden else []), cfg.k], gen, cfg.beta)
    h = random_relu_net([cfg.k, cfg.hidden, cfg.d_out], gen, cfg.beta)
    inner = (lambda z: torch.relu(z + cfg.bottleneck_shift)) if cfg.bottleneck == "relu" else (lambda z: z)
    return lambda x: relu_net_forward(h, inner(relu_net_forward(g, x)))


def true_jacobian_ranks(cfg: RankKConfig, x: torch.Tensor, rel_tol: float = 1e-9) -> np.ndarray:
    """Rank of Jf*(x_i) at each row of x (float64 torch.func Jacobians; s_j > rel_tol·s_1): ≤ k, Jacot 2023 Def. 1."""
    f = rank_k_function(cfg)
    jac = torch.func.vmap(torch.func.jacrev(lambda xi: f(xi[None])[0]))(torch.as_tensor(x, dtype=torch.float64))
    return numerical_rank(torch.linalg.svdvals(jac).numpy(), rel_tol)


@DATASETS.register("rank_k", RankKConfig)
def load_rank_k(cfg: RankKConfig) -> DataBundle:
    """x ~ N(0, I_d_in), y = f*(x) with BN-rank ≤ k (+ noise on train), as in Jacot 2023 Fig 1."""
    return function_bundle("rank_k", cfg, rank_k_function(cfg),
                           lambda n, stream: gaussian(rng(cfg.seed, stream), n, cfg.d_in), cfg.n_train, {"k": cfg.k})
