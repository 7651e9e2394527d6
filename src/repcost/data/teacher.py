"""Gaussian inputs through a fixed random ReLU teacher (Jacot et al. 2022, Fig 2 right, App. A)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

from ..errors import check
from ..registry import DATASETS
from ._nets import gaussian, random_relu_net, relu_net_forward, rng
from .bundle import DataBundle


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
        check(self.seed >= 0, "seed", self.seed, "an integer >= 0")
        check(self.teacher_seed >= 0, "teacher_seed", self.teacher_seed, "an integer >= 0")
        check(len(self.widths) >= 2 and all(int(w) == w and w >= 1 for w in self.widths),
              "widths", self.widths, "a list of >= 2 positive ints (d_in, hidden…, d_out)")
        check(self.beta >= 0, "beta", self.beta, "a bias amount >= 0")
        check(self.n_train >= 1, "n_train", self.n_train, "an integer >= 1")
        check(self.n_test >= 0, "n_test", self.n_test, "an integer >= 0")
        check(self.noise >= 0, "noise", self.noise, "a noise std >= 0")


def teacher_params(cfg: TeacherConfig) -> list:
    """The teacher's [(W_l, b_l)]: depth len(widths)−1, He-scaled Gaussian weights (Jacot 2022 App. A)."""
    return random_relu_net([int(w) for w in cfg.widths], rng(cfg.teacher_seed, 0), cfg.beta)


@DATASETS.register("teacher", TeacherConfig)
def load_teacher(cfg: TeacherConfig) -> DataBundle:
    """x ~ N(0, I_{n_0}), y = f_teacher(x) (+ noise on train) as in Jacot et al. 2022 Fig 2 / App. A."""
    params = teacher_params(cfg)
    d_in = int(cfg.widths[0])
    x_train = gaussian(rng(cfg.seed, 0), cfg.n_train, d_in)
    y_train = relu_net_forward(params, x_train)
    if cfg.noise > 0:
        y_train = y_train + cfg.noise * gaussian(rng(cfg.seed, 2), *y_train.shape)
    x_test = y_test = None
    if cfg.n_test > 0:
        x_test = gaussian(rng(cfg.seed, 1), cfg.n_test, d_in)
        y_test = relu_net_forward(params, x_test)
    meta = {"widths": [int(w) for w in cfg.widths], "depth": len(cfg.widths) - 1}
    return DataBundle("teacher", x_train, y_train, x_test, y_test, meta=meta)
