"""The CUDA path: training and analyses on a GPU (skipped without one)."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from repcost.config import compose_config, validate
from repcost.train.run import run_training

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cuda_training_and_analysis(tmp_path, dtype):
    args = ["model=fc", "model.depth=4", "model.width=32", "data=rank_k", "data.n_train=200", "data.n_test=50",
            "train=adam", "train.phases.0.steps=200", "train.progress=false", "analysis=spectra", f"dtype={dtype}"]
    cfg = compose_config(args + ["device=cuda"])
    s = run_training(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / "gpu")
    assert s["device"].startswith("cuda") and s["status"] == "finished"
    cfg = compose_config(args + ["device=cpu"])
    c = run_training(validate(cfg), OmegaConf.to_container(cfg, resolve=True), tmp_path / "cpu")
    tol = 1e-3 if dtype == "float32" else 1e-8
    assert s["objective"] == pytest.approx(c["objective"], rel=tol)
    assert s["jacobian.prop3_bound"] == pytest.approx(c["jacobian.prop3_bound"], rel=tol)
