"""Gaussian inputs through a fixed random ReLU teacher (Jacot et al. 2022, Fig 2 right, App. A)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

from ..errors import check
from ..registry import DATASETS
from ._nets import gaussian, random_relu_net, relu_net_forward, rng
from .bundle import DataBundle, check_shared, function_bundle


@dataclass
class TeacherConfig:
    name: str = "teacher"
    seed: int = 0  # data seed (inputs, label noise), independent of the training seed
    teacher_seed: int = 0  # seed of the teacher's weights
    # (d_in, hidden…, d_out): depth L = len(widths)-1 = 3 weight matrices
    widths: List[int] = field(default_factory=lambda: [50, 10, 10, 10])
    beta: float = 0.0  # teacher bias amount β (0 = no bias); biases drawn like a weight column
    n_train: int = 1000  # training inputs x ~ N(0, I_d_in)
    n_test: int = 1000  # test inputs (0 = no test split); test targets are noiseless
    noise: float = 0.0  # std of Gaussian noise added to the training targets

    def __post_init__(self):
        check_shared(self)
        check(len(self.widths) >= 2 and all(int(w) == w and w >= 1 for w in self.widths),
              "widths", self.widths, "a list of >= 2 positive ints (d_in, hidden…, d_out)")
        check(self.beta >= 0, "beta", self.beta, "a bias amount >= 0")


@DATASETS.register("teacher", TeacherConfig)
def load_teacher(cfg: TeacherConfig) -> DataBundle:
    """x ~ N(0, I_{n_0}), y = f_teacher(x) (+ noise on train) as in Jacot et al. 2022 Fig 2 / App. A."""
    widths = [int(w) for w in cfg.widths]
    params = random_relu_net(widths, rng(cfg.teacher_seed, 0), cfg.beta)  # He-scaled Gaussian weights (App. A)
    meta = {"widths": widths, "depth": len(widths) - 1}
    return function_bundle("teacher", cfg, lambda x: relu_net_forward(params, x),
                           lambda n, stream: gaussian(rng(cfg.seed, stream), n, widths[0]), cfg.n_train, meta)
