"""X = I_N, Y = B_N = EᵀE of the complete bipartite graph K_{N/2,N/2} (Jacot et al. 2022 Prop 13–14)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import check
from ..registry import DATASETS
from .bundle import DataBundle, check_shared


@dataclass
class BipartiteConfig:
    name: str = "bipartite"
    seed: int = 0  # unused (the dataset is deterministic); kept so data.seed sweeps work
    n: int = 10  # number of vertices = samples N (even >= 2); CP-rank of Y is N²/4

    def __post_init__(self):
        check_shared(self)
        check(self.n >= 2 and self.n % 2 == 0, "n", self.n, "an even integer >= 2")


def bipartite_incidence(n: int) -> torch.Tensor:
    """Edge–vertex incidence E (N²/4 × N) of K_{N/2,N/2}: E_ev = 1 iff v ends e (Jacot 2022 Prop 13)."""
    eye, ones = torch.eye(n // 2, dtype=torch.float64), torch.ones(n // 2, 1, dtype=torch.float64)
    # edge u·N/2 + v joins u in group A = 0…N/2−1 and N/2 + v in group B = N/2…N−1: E = [I ⊗ 1, 1 ⊗ I]
    return torch.cat([torch.kron(eye, ones), torch.kron(ones, eye)], dim=1)


@DATASETS.register("bipartite", BipartiteConfig)
def load_bipartite(cfg: BipartiteConfig) -> DataBundle:
    """X_N = I_N, Y_N = B_N = EᵀE = [[N/2·I, 1], [1, N/2·I]] with CP-rank N²/4 (Jacot 2022 Prop 13–14)."""
    e = bipartite_incidence(cfg.n)
    y = e.T @ e  # symmetric, so rows-as-samples equals the paper's columns-as-samples
    x = torch.eye(cfg.n, dtype=torch.float64)
    meta = {"n_edges": e.shape[0], "cp_rank": cfg.n**2 // 4}
    return DataBundle("bipartite", x, y, meta=meta)
