"""A model family that is not in the package, in one class plus one YAML, runs everything through the CLI path.

The family (a bias-free leaky-ReLU net with a width-k bottleneck layer) implements only the model
protocol's required methods, declares its structure and registers a cost; the analyses, the engine,
ensembles and the run directory work with it unchanged. A family with skip connections that declares
no symmetry gets spectra and Jacobians but no balance or unit-gap numbers: those say "not applicable".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from repcost.analysis.family_costs import FAMILY_COSTS, register_family_costs
from repcost.models.base import Hidden, RepModel, Structure
from repcost.registry import MODELS
from helpers import train


YAML = """# A leaky-ReLU net with a bottleneck (registered by tests/test_new_family.py)
name: bottleneck_leaky
depth: 4
width: 12
bottleneck: 2
slope: 0.2
"""


@dataclass
class BottleneckConfig:
    name: str = "bottleneck_leaky"
    depth: int = 4  # weight matrices; the second hidden layer is the bottleneck
    width: int = 12
    bottleneck: int = 2
    slope: float = 0.2


class BottleneckLeaky(RepModel):
    family = "bottleneck_leaky"
    structure = Structure(layer_rescaling=True, unit_rescaling=True)  # a plain chain of matrices, no biases

    def __init__(self, cfg: BottleneckConfig, d_in: int, d_out: int, gen: torch.Generator):
        super().__init__()
        self.depth, self.slope = cfg.depth, cfg.slope
        dims = [d_in, cfg.width, cfg.bottleneck] + [cfg.width] * (cfg.depth - 3) + [d_out]
        self.weights = nn.ParameterList(
            nn.Parameter(torch.randn(dims[i + 1], dims[i], generator=gen, dtype=torch.float64) / dims[i] ** 0.5)
            for i in range(cfg.depth))

    def activation(self, z: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(z, self.slope)

    def hidden(self, x: torch.Tensor) -> list[Hidden]:
        out, h = [], x
        for W in list(self.weights)[:-1]:
            z = h @ W.T
            h = self.activation(z)
            out.append(Hidden(z, h))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.hidden(x)[-1].post
        return h @ self.weights[-1].T

    def weight_matrices(self) -> list[torch.Tensor]:
        return list(self.weights)

    def regularised_params(self) -> list[torch.Tensor]:
        return list(self.weights)



def bottleneck_costs(model, x_train, y_train):
    return {"costs.bottleneck_sq_norm": float((model.weights[1].detach() ** 2).sum())}, {}


@pytest.fixture
def family(tmp_path):
    """Register the family and write its YAML into a user config dir; unregister afterwards."""
    MODELS.register("bottleneck_leaky", BottleneckConfig)(lambda cfg, d_in, d_out, gen: BottleneckLeaky(cfg, d_in, d_out, gen))
    register_family_costs("bottleneck_leaky", bottleneck_costs)
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "bottleneck_leaky.yaml").write_text(YAML)
    yield conf
    MODELS._entries.pop("bottleneck_leaky")
    FAMILY_COSTS.pop("bottleneck_leaky")


QUICK = ("model=bottleneck_leaky", "train.phases.0.steps=60", "train.phases.1.steps=20", "train.progress=false")


def test_new_family_trains_with_spectra(tmp_path, family):
    d = tmp_path / "spectra"
    code, _, err = train([f"--config-dir={family}", *QUICK, "data=teacher", "data.n_train=40", "data.n_test=10",
                          "analysis=spectra", f"hydra.run.dir={d}"], tmp_path)
    assert code == 0, err
    s = json.loads((d / "summary.json").read_text())
    assert s["model"] == "bottleneck_leaky" and s["status"] == "finished"
    assert s["jacobian.rank_max"] <= 2  # a width-2 layer bounds the Jacobian's rank everywhere
    assert s["hidden.post2.rank"] <= 2 and s["hidden.min_rank"] <= 2
    assert {"balance.layer_gap_max", "balance.neuron_gap_max", "weights.W2.rank"} <= set(s)


def test_new_family_runs_analysis_full_and_ensembles(tmp_path, family):
    common = [f"--config-dir={family}", *QUICK, "data=projection", "data.n_points=20", "analysis=full"]
    code, _, err = train([*common, "train.ensemble_size=2", f"hydra.run.dir={tmp_path / 'ens'}"], tmp_path)
    assert code == 0, err
    top = json.loads((tmp_path / "ens" / "summary.json").read_text())
    assert "costs.bottleneck_sq_norm" in top and top["ensemble_size"] == 2
    code, _, err = train([*common, "seed=1", f"hydra.run.dir={tmp_path / 'single'}"], tmp_path)
    assert code == 0, err
    single = json.loads((tmp_path / "single" / "summary.json").read_text())
    member = json.loads((tmp_path / "ens" / "members" / "1" / "summary.json").read_text())
    assert member["config_hash"] == single["config_hash"]
    for k in ("objective", "train_loss", "param_sq_norm", "costs.bottleneck_sq_norm"):
        assert abs(member[k] - single[k]) <= 1e-10 * max(1.0, abs(single[k])), k


@dataclass
class CircleConfig:
    name: str = "circle"
    seed: int = 0
    n: int = 16  # points on the unit circle, labelled by their angle's sine and cosine of twice it


def build_circle(cfg: CircleConfig):
    from repcost.data.bundle import DataBundle

    t = torch.rand(cfg.n, generator=torch.Generator().manual_seed(cfg.seed), dtype=torch.float64) * 6.283
    x = torch.stack([t.cos(), t.sin()], 1)
    return DataBundle("circle", x, torch.stack([(2 * t).cos(), (2 * t).sin()], 1))


def test_new_dataset_is_one_function_and_one_yaml(tmp_path):
    from repcost.registry import DATASETS

    DATASETS.register("circle", CircleConfig)(build_circle)
    conf = tmp_path / "conf"
    (conf / "data").mkdir(parents=True)
    (conf / "data" / "circle.yaml").write_text("name: circle\nseed: 0\nn: 16\n")
    try:
        code, _, err = train([f"--config-dir={conf}", "data=circle", "model=fc", "model.width=8", "data.n=12",
                              "train.phases.0.steps=20", "train.phases.1.steps=0", "train.progress=false",
                              f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
        assert code == 0, err
        assert json.loads((tmp_path / "run" / "summary.json").read_text())["data"] == "circle"
    finally:
        DATASETS._entries.pop("circle")


@dataclass
class SkipConfig:
    name: str = "skip_relu"
    depth: int = 3
    width: int = 6


class SkipReLU(RepModel):
    """h_{ℓ} = h_{ℓ-1} + relu(W_ℓ h_{ℓ-1}) between equal-width layers: identity skips break the per-unit and
    per-layer rescaling symmetries, so the family declares none."""

    family = "skip_relu"

    def __init__(self, cfg: SkipConfig, d_in: int, d_out: int, gen: torch.Generator):
        super().__init__()
        self.depth = cfg.depth
        dims = [d_in] + [cfg.width] * (cfg.depth - 1) + [d_out]
        self.weights = nn.ParameterList(
            nn.Parameter(torch.randn(dims[i + 1], dims[i], generator=gen, dtype=torch.float64) / dims[i] ** 0.5)
            for i in range(cfg.depth))

    def hidden(self, x: torch.Tensor) -> list[Hidden]:
        out, h = [], x
        for i, W in enumerate(list(self.weights)[:-1]):
            z = h @ W.T
            h = torch.relu(z) + (h if i > 0 else 0)
            out.append(Hidden(z, h))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hidden(x)[-1].post @ self.weights[-1].T

    def weight_matrices(self) -> list[torch.Tensor]:
        return list(self.weights)

    def regularised_params(self) -> list[torch.Tensor]:
        return list(self.weights)


def test_a_family_that_declares_no_symmetry_gets_no_balance_numbers(tmp_path):
    MODELS.register("skip_relu", SkipConfig)(lambda cfg, d_in, d_out, gen: SkipReLU(cfg, d_in, d_out, gen))
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "skip_relu.yaml").write_text("name: skip_relu\ndepth: 3\nwidth: 6\n")
    try:
        d = tmp_path / "skip"
        code, _, err = train([f"--config-dir={conf}", "model=skip_relu", "train.phases.0.steps=40",
                              "train.phases.1.steps=10", "train.progress=false", "data=teacher", "data.n_train=30",
                              "data.n_test=10", "analysis=full", f"hydra.run.dir={d}"], tmp_path)
        assert code == 0, err
        s = json.loads((d / "summary.json").read_text())
    finally:
        MODELS._entries.pop("skip_relu")
    assert {"hidden.min_rank", "weights.W2.rank", "jacobian.rank_max", "critical.stationarity"} <= set(s)
    assert not {k for k in s if "unit_gap" in k or "layer_gap" in k or "neuron_gap" in k}
    na = s["not_applicable"]
    assert {"critical.unit_gap", "balance.layer_gap", "balance.neuron_gap", "jacobian.prop3_bound"} <= set(na)
    assert "jacobian.prop3_bound" not in s  # Jacot 2023 Prop 3 bounds chains; a skip net can exceed it
    assert "registered representation costs" in na.pop("costs") and not {k for k in s if k.startswith("costs.")}
    assert all("declares no" in why for why in na.values())


def test_prop3_bound_fails_for_a_skip_net_and_is_not_reported():
    from repcost.analysis.hooks import CommonOptions
    from repcost.analysis.spectra import jacobian_spectra, prop3_bound, schatten_cost
    from repcost.registry import ANALYSES

    m = SkipReLU(SkipConfig(depth=3, width=1), 1, 1, torch.Generator().manual_seed(0))
    with torch.no_grad():
        for W, v in zip(m.weights, (1.0, 0.0, 1.0)):  # f(x) = relu(x) + relu(0·relu(x)) = relu(x): J = 1 at x = 1
            W.fill_(v)
    x = torch.ones(1, 1, dtype=torch.float64)
    assert schatten_cost(jacobian_spectra(m, x), 3) == pytest.approx(1.0) and prop3_bound(m) == pytest.approx(2 / 3)
    r = ANALYSES.get("jacobian").build.fn(m, x, CommonOptions(), SimpleNamespace(n_points=1))
    assert "jacobian.prop3_bound" not in r.scalars and "declares no" in r.not_applicable["jacobian.prop3_bound"]
    assert r.scalars["jacobian.schatten_cost_max"] == pytest.approx(1.0)
