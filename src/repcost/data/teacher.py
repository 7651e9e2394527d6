"""Gaussian inputs through a fixed random ReLU teacher (Jacot et al. 2022, Fig 2 right, App. A)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import check
from ..registry import DATASETS
from .bundle import DataBundle, check_shared, function_bundle, gaussian, rng


@dataclass
class TeacherConfig:
    name: str = "teacher"
    seed: int = 0  # data seed (inputs, label noise), independent of the training seed
    teacher_seed: int = 0  # seed of the teacher's weights
    # (d_in, hidden…, d_out): depth L = len(widths)-1 = 3 weight matrices
    widths: list[int] = field(default_factory=lambda: [50, 10, 10, 10])
    beta: float = 0.0  # teacher bias amount β (0 = no bias); biases drawn like a weight column
    n_train: int = 1000  # training inputs x ~ N(0, I_d_in)
    n_test: int = 1000  # test inputs (0 = no test split); test targets are noiseless
    noise: float = 0.0  # std of Gaussian noise added to the training targets

    def __post_init__(self):
        check_shared(self)
        check(len(self.widths) >= 2 and all(int(w) == w and w >= 1 for w in self.widths),
              "widths", self.widths, "a list of >= 2 positive ints (d_in, hidden…, d_out)")


def random_relu_net(dims: list, gen: np.random.Generator, beta: float = 0.0) -> list:
    """Random ReLU-net parameters [(W_l, b_l)] for widths dims = (n_0, …, n_L) (Jacot 2022 App. A).

    W_l ~ N(0, gain/n_{l-1}) with gain 1 on the input layer and 2 on layers fed by a ReLU
    (He init, as in models/fc.py), so every pre-activation has variance ≈ 1 on N(0, I) inputs.
    b_l is drawn like one more column of W_l and enters as β·b_l (Jacot 2022 §2); β = 0: no bias.
    """
    stds = [math.sqrt((1.0 if i == 0 else 2.0) / n) for i, n in enumerate(dims[:-1])]
    return [(gaussian(gen, n_out, n_in) * std, gaussian(gen, n_out) * std * beta)  # W_l drawn before b_l
            for n_in, n_out, std in zip(dims, dims[1:], stds)]


def relu_net_forward(params: list, x: torch.Tensor) -> torch.Tensor:
    """f(x) = W_L σ(… σ(W_1 x + β b_1) …) + β b_L for rows x (N, n_0); σ = ReLU, output linear."""
    for w, b in params[:-1]:
        x = torch.relu(x @ w.T + b)
    return x @ params[-1][0].T + params[-1][1]


@DATASETS.register("teacher", TeacherConfig)
def load_teacher(cfg: TeacherConfig) -> DataBundle:
    """x ~ N(0, I_{n_0}), y = f_teacher(x) (+ noise on train) as in Jacot et al. 2022 Fig 2 / App. A."""
    widths = [int(w) for w in cfg.widths]
    params = random_relu_net(widths, rng(cfg.teacher_seed, 0), cfg.beta)  # He-scaled Gaussian weights (App. A)
    meta = {"widths": widths, "depth": len(widths) - 1}
    return function_bundle("teacher", cfg, lambda x: relu_net_forward(params, x),
                           lambda n, stream: gaussian(rng(cfg.seed, stream), n, widths[0]), cfg.n_train, meta)
