"""The one data type every dataset returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch


@dataclass
class DataBundle:
    """Train (and optional test) split of a dataset; samples are rows.

    Inputs are float64 (N, d_in). Regression targets are float64 (N, d_out); classification
    targets are int64 class indices (N,). The trainer casts to the run's dtype and device.
    """

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: Optional[torch.Tensor] = None
    y_test: Optional[torch.Tensor] = None
    task: str = "regression"  # or "classification"
    n_classes: int = 0
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.task not in ("regression", "classification"):
            raise ValueError(f"task must be regression or classification, got {self.task}")
        if self.x_train.ndim != 2:
            raise ValueError(f"x_train must be (N, d), got shape {tuple(self.x_train.shape)}")
        if self.task == "regression" and self.y_train.ndim != 2:
            raise ValueError(f"regression y_train must be (N, k), got {tuple(self.y_train.shape)}")

    @property
    def d_in(self) -> int:
        """Input dimension."""
        return self.x_train.shape[1]

    @property
    def d_out(self) -> int:
        """Network output dimension: target dimension, or number of classes."""
        return self.n_classes if self.task == "classification" else self.y_train.shape[1]

    @property
    def has_test(self) -> bool:
        """Whether the dataset has a test split."""
        return self.x_test is not None

    def to(self, dtype: torch.dtype, device) -> "DataBundle":
        """The same bundle with inputs (and regression targets) cast to dtype on device."""

        def cast(t, is_y):
            if t is None:
                return None
            if is_y and self.task == "classification":
                return t.to(device=device)
            return t.to(dtype=dtype, device=device)

        return DataBundle(self.name, cast(self.x_train, False), cast(self.y_train, True),
                          cast(self.x_test, False), cast(self.y_test, True), self.task,
                          self.n_classes, dict(self.meta))
