"""Figures as importable compute → plot → verdict steps, checked on tiny runs trained here."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from repcost.analysis.arrays import float64_model
from repcost.analysis.relu_1d import deep_relu_net_1d_function
from repcost.config import compose_config, validate
from repcost.figures import LoadedRun, Verdict, save_figure
from repcost.figures import savarese19_fig2, savarese19_parallel
from repcost.train.run import train_run


def _runs(tmp_path, preset: str, key: str, values, *extra: str) -> list[LoadedRun]:
    out = []
    for v in values:
        cfg = compose_config([f"experiment={preset}", f"{key}={v}", "train.progress=false", *extra])
        d = tmp_path / f"{key}={v}"
        train_run(validate(cfg), OmegaConf.to_container(cfg, resolve=True), d)
        out.append(LoadedRun(d))
    return out


@pytest.fixture(scope="module")
def fig2_runs(tmp_path_factory):
    return _runs(tmp_path_factory.mktemp("f2"), "savarese19-fig2-quick", "model.depth", (2, 3), "model.width=12",
                 "train.phases.0.steps=150", "train.phases.1.steps=50")


@pytest.mark.slow
def test_savarese19_fig2_compute_plot_verdict(fig2_runs, tmp_path):
    rows = savarese19_fig2.compute(fig2_runs)
    assert [r["depth_L"] for r in rows] == [2, 3]
    for r, run in zip(rows, fig2_runs):
        # the exact piecewise-linear form R̄ is read from agrees with the net's own forward pass on the plot grid
        chain = float64_model(run.model).affine_chain()
        exact = deep_relu_net_1d_function(chain.weights, chain.biases, chain.slope)
        assert np.allclose(exact(r["_grid"]), r["_f"], rtol=1e-9, atol=1e-9)
        assert r["rbar"] == pytest.approx(exact.rbar())
        assert r["half_param_sq_norm"] == pytest.approx(0.5 * run.summary["param_sq_norm"])
    fig = savarese19_fig2.plot(rows)
    assert len(fig.axes) >= len(rows)
    png, csv = save_figure(fig, "savarese19-fig2", [{**r, "verdict": "n/a"} for r in rows], tmp_path)
    assert "_f" not in csv.read_text().splitlines()[0]  # plot arrays stay out of the CSV


def test_savarese19_fig2_verdict_rules():
    good = [{"hidden_layers": h, "rbar": 1.05, "rbar_over_min": 1.05, "spline_min_cost": 1.0, "half_param_sq_norm": 1.0,
             "train_loss": 1e-6, "critical_point": True} for h in (1, 2, 3)]
    bad = [dict(good[0], rbar_over_min=1.5)] + good[1:]
    assert savarese19_fig2.verdict(good, full=True).passed is True
    assert savarese19_fig2.verdict(bad, full=True).passed is False
    assert savarese19_fig2.verdict(bad, full=False).passed is None  # a quick run cannot refute the paper
    assert isinstance(savarese19_fig2.verdict(good, full=False), Verdict)


@pytest.mark.slow  # several seconds of process starts and training
def test_savarese19_parallel_compute_and_verdict(tmp_path):
    runs = _runs(tmp_path, "savarese19-parallel-quick", "model.depth", (2, 3), "model.n_subnets=4", "model.width=3",
                 "train.phases.0.steps=30", "train.phases.1.steps=5")
    rows = savarese19_parallel.compute(runs)
    for r in rows:
        assert 0 <= r["active_subnets"] <= 4
        assert r["C_L"] >= r["l2L_quasinorm"] * (1 - 1e-9)  # AM–GM (Savarese Thm C.1's proof), at any parameters
    assert len(savarese19_parallel.plot(rows).axes) >= 2
    v = savarese19_parallel.verdict(rows, full=True)
    assert v.passed == all(r["active_subnets"] <= r["n_points_N"] for r in rows if r["depth_L"] >= 3)


@pytest.mark.slow  # several seconds of process starts and training
def test_jacot23_fig2_counts_tripoints_of_real_nets_and_judges_them(tmp_path):
    from repcost.figures import jacot23_fig2

    runs = _runs(tmp_path, "jacot23-fig2-quick", "model.depth", (2, 3), "train.lam=1e-3", "data.n_per_class=8",
                 "data.n_test_per_class=4", "train.phases.0.steps=30")
    rows = jacot23_fig2.compute(runs)
    assert [r["depth"] for r in rows] == [2, 3]
    for r in rows:
        assert r["tripoints"] <= r["tripoints_unfiltered"]  # the sliver filter only removes junctions
        assert 0.0 <= r["train_acc"] <= 1.0 and r["_panel"]["labels"].shape[1] == jacot23_fig2.GRID
    assert len(jacot23_fig2.plot(rows).axes) >= 2
    made = [dict(rows[0], tripoints=2), dict(rows[1], tripoints=0)]
    assert jacot23_fig2.verdict(made, full=True).passed is True
    assert jacot23_fig2.verdict([made[0], dict(made[1], tripoints=1)], full=True).passed is False


def test_savarese19_fig1_rows_start_with_the_spline_and_judge_both_widths(tmp_path):
    from repcost.figures import savarese19_fig1

    runs = _runs(tmp_path, "savarese19-fig1-quick", "model.width", (5, 8), "train.ensemble_size=2",
                 "train.phases=[{optimizer:adam,lr:0.01,steps:100,lam_factor:10},{optimizer:adam,lr:0.001,steps:20}]")
    rows = savarese19_fig1.compute(runs)
    assert rows[0]["panel"] == "linear spline" and rows[0]["rbar_over_min"] == pytest.approx(1.0)  # Thm 3.3's minimiser
    assert [r["width"] for r in rows[1:]] == [5, 8]
    assert len(savarese19_fig1.plot(rows).axes) >= 3
    near = [rows[0]] + [dict(r, C_over_min=1.01, rbar_over_min=1.02) for r in rows[1:]]
    assert savarese19_fig1.verdict(near, full=True).passed is True
    assert savarese19_fig1.verdict([near[0], near[1], dict(near[2], C_over_min=1.2)], full=True).passed is False


def test_ongie22_fig1_measures_alignment_and_judges_the_trend(tmp_path):
    from repcost.figures import ongie22_fig1

    runs = _runs(tmp_path, "ongie22-fig1-quick", "model.depth", (2, 3), "model.width=6", "data.n_points=12",
                 "train.phases.0.steps=40")
    rows = ongie22_fig1.compute(runs)
    assert [r["L"] for r in rows] == [2, 3]
    for r in rows:
        assert 0.0 <= r["s2_over_s1"] <= 1.0 and 0.0 <= r["perp_variation"] <= 1.0 + 1e-9
        assert r["R2"] > 0 and r["_s"][0] == pytest.approx(max(r["_s"]))
    assert len(ongie22_fig1.plot(rows).axes) >= 3
    down = [dict(rows[0], perp_variation=0.5), dict(rows[1], perp_variation=0.1)]
    assert ongie22_fig1.verdict(down, full=True).passed is True
    up = [dict(rows[0], perp_variation=0.1), dict(rows[1], perp_variation=0.5)]
    assert ongie22_fig1.verdict(up, full=True).passed is False


def test_ongie22_fig4_constructed_interpolants_and_prop52(tmp_path):
    """f and g interpolate, R2 is their path norm, and the verdict reads Prop 5.2 off the rows."""
    import argparse

    from repcost.figures import ongie22_fig4

    data_cfg, _ = ongie22_fig4.inputs(argparse.Namespace(full=False, full_only=[]))
    rows = ongie22_fig4.compute((data_cfg, np.array([0.55, 0.7, 0.9])))
    for r in rows:
        assert r["max_interp_error"] < 1e-9  # both constructions interpolate the samples
        assert r["R3_f"] > 0 and r["R3_g"] > 0
    assert len(ongie22_fig4.plot(rows).axes) >= 2
    v = ongie22_fig4.verdict(rows, full=False)
    assert v.passed == (all(r["R2_f"] < r["R2_g"] for r in rows)
                        and all(r["R3_g"] < r["R3_f"] for r in rows if r["prop52_holds"]))


def test_jacot23_depth_reads_ranks_from_the_runs_analysis_files(tmp_path):
    from repcost.figures import jacot23_depth

    runs = _runs(tmp_path, "jacot23-depth-quick", "model.depth", (2, 3), "model.width=8", "data.n_train=40",
                 "data.n_test=20", "train.phases.0.steps=30", *(f"train.phases.{i}.steps=10" for i in range(1, 5)),
                 "analysis.n_points=4")
    rows = jacot23_depth.compute(runs)
    assert [r["depth"] for r in rows] == [2, 3]
    for r in rows:
        # the bottleneck is the lowest of the hidden ranks the row lists; no rank exceeds min(d_in, d_out)
        assert r["bottleneck_rank"] == min(map(int, r["hidden_ranks"].split()))
        assert r["jacobian_rank"] <= min(r["d_in"], r["d_out"]) and r["krr_jacobian_rank"] <= min(r["d_in"], r["d_out"])
    assert len(jacot23_depth.plot(rows).axes) >= 2
    n = len(rows[1]["true_jacobian_ranks"].split())
    good = [dict(rows[0], jacobian_rank=rows[0]["k"] + 3, krr_jacobian_rank=rows[0]["k"] + 5),
            dict(rows[1], jacobian_rank_equals_true=n, krr_jacobian_rank=rows[0]["k"] + 5)]
    assert jacot23_depth.verdict(good, full=True).passed is True
    bad = [dict(good[0], jacobian_rank=good[0]["k"]), good[1]]
    assert jacot23_depth.verdict(bad, full=True).passed is False
    _decides_per_seed_by_majority(jacot23_depth.verdict, good, bad)


def _decides_per_seed_by_majority(verdict, good: list[dict], bad: list[dict]) -> None:
    """The quick variant decides by the full run's rule; with several seeds each is judged on its own rows and the
    figure is reproduced when most seeds are."""
    for rows_ in (good, bad):
        assert verdict(rows_, full=False).passed is verdict(rows_, full=True).passed

    def seeds(*ok):
        return [dict(r, seed=i) for i, o in enumerate(ok) for r in (good if o else bad)]
    two_of_three = verdict(seeds(True, False, True), full=False)
    assert two_of_three.passed is True and "in 2/3 seeds" in two_of_three.text
    assert verdict(seeds(False, False, True), full=False).passed is False


@pytest.mark.slow
def test_jacot23_fig1_spectra_rows_and_rank_verdict(tmp_path):
    from repcost.figures import jacot23_fig1

    runs = _runs(tmp_path, "jacot23-fig1-quick", "seed", (0,), "model.width=12", "model.depth=4",
                 "data.n_train=60", "data.n_test=20", "train.phases.0.steps=30", "train.phases.1.steps=10",
                 "analysis.n_points=3")
    rows = jacot23_fig1.compute(runs)
    kinds = [r["kind"] for r in rows]
    assert kinds.count("hidden") == 3 and kinds.count("weight") == 4 and kinds.count("jacobian") == 3
    assert kinds.count("balance") == 3 and kinds[-1] == "summary"
    weights = [r for r in rows if r["kind"] == "weight"]
    assert weights[0]["sq_norm"] == pytest.approx(float((runs[0].model.weights[0].detach() ** 2).sum()))
    assert len(jacot23_fig1.plot(rows).axes) == 3
    s = rows[-1]
    assert jacot23_fig1.verdict(rows[:-1] + [dict(s, middle_max_ratio=0.05)], full=True).passed is True
    assert jacot23_fig1.verdict(rows[:-1] + [dict(s, middle_max_ratio=0.5)], full=True).passed is False
    # several seeds: the verdict is their pass rate, reproduced when most pass
    def seeds(*ratios):
        return [dict(r, seed=i) if r["kind"] != "summary" else dict(r, seed=i, middle_max_ratio=q)
                for i, q in enumerate(ratios) for r in rows]
    two_of_three = jacot23_fig1.verdict(seeds(0.05, 0.5, 0.02), full=True)
    assert two_of_three.passed is True and f"middle layers rank {s['k']} in 2/3 seeds" in two_of_three.text
    assert jacot23_fig1.verdict(seeds(0.05, 0.5, 0.3), full=True).passed is False
    # the quick variant decides by the same rule
    for ratios in ((0.05, 0.5, 0.02), (0.05, 0.5, 0.3)):
        assert jacot23_fig1.verdict(seeds(*ratios), full=False).passed is jacot23_fig1.verdict(seeds(*ratios), full=True).passed


def test_jacot22_bipartite_bound_exact_costs_and_verdict(tmp_path):
    """On hand-made sweep rows: the objective sits above the convex lower bound; the verdict reads the plateau."""
    from repcost.figures import jacot22_bipartite

    lam, n = 1e-3, 4  # CP-rank N²/4 = 4
    for d, cfg in (("b", f"train: {{lam: {lam}}}\n"), ("p", "data: {n_points: 3}\n")):  # what the figure reads of the runs
        (tmp_path / d / ".hydra").mkdir(parents=True)
        (tmp_path / d / ".hydra" / "config.yaml").write_text(cfg)
    bip = [{"data.n": str(n), "model.width": str(w), "objective": str(o), "wall_time_s": "1", "path": str(tmp_path / "b")}
           for w, o in ((2, 0.030), (3, 0.0255), (4, 0.0250), (5, 0.0250))]
    p15 = [{"model.width": str(w), "objective": str(o), "wall_time_s": "1", "path": str(tmp_path / "p")}
           for w, o in ((1, 0.2), (2, 0.05), (4, 0.0401), (8, 0.0400))]
    rows = jacot22_bipartite.compute((bip, p15))
    b = [r for r in rows if r["panel"] == "bipartite"]
    assert all(r["lower_bound"] > 0 for r in b) and b[0]["lower_bound"] == b[-1]["lower_bound"]
    # from the CP-rank N²/4 = N = 4 on, the exact minimal cost is N² (as in tests/test_alignment.py)
    costs = [r["min_cost_R_n"] for r in b if r["min_cost_R_n"] is not None]
    assert len(costs) == 2 and all(c == pytest.approx(n * n, rel=1e-3) for c in costs)
    assert len(jacot22_bipartite.plot(rows).axes) == 2
    assert jacot22_bipartite.verdict(rows, full=True).passed is True  # 3 worse than 4, flat from 4; Prop 15 by 4N
    flat = [dict(r, objective=0.025) if r["panel"] == "bipartite" else r for r in rows]
    assert jacot22_bipartite.verdict(flat, full=True).passed is False


def test_jacot22_fig2_plateau_rows_and_verdict(tmp_path):
    """Hand-made sweep rows: the plateau start follows the objective curve; the verdict reads it."""
    from repcost.figures import jacot22_fig2

    for d in ("m", "t"):
        (tmp_path / d / ".hydra").mkdir(parents=True)
        (tmp_path / d / ".hydra" / "config.yaml").write_text("{data: {n_train: 100}, train: {lam: 1.0e-6}}\n")

    def rows(lam, objs, d):
        return [{"model.width": str(w), "objective": str(o), "train.lam": str(lam), "train_loss": str(o),
                 "test_loss": str(2 * o), "wall_time_s": "1", "path": str(tmp_path / d)}
                for w, o in zip((2, 5, 10, 20, 50), objs)]

    mnist = rows(1e-3, (1.0, 0.5, 0.3, 0.3, 0.3), "m") + rows(1e-4, (0.9, 0.4, 0.2, 0.2, 0.2), "m")
    teacher = rows(1e-6, (0.2, 0.1, 0.05, 0.0501, 0.05), "t")
    out = jacot22_fig2.compute((mnist, teacher))
    assert {r["plateau_start_0.05"] for r in out} == {10}
    assert len(jacot22_fig2.plot(out).axes) == 2
    assert jacot22_fig2.verdict(out, full=True).passed is True
    late = rows(1e-6, (0.2, 0.1, 0.08, 0.07, 0.05), "t")
    out2 = jacot22_fig2.compute((mnist, late))
    assert jacot22_fig2.verdict(out2, full=True).passed is False
    for o in (out, out2):  # the quick size decides by the same rule
        assert jacot22_fig2.verdict(o, full=False).passed is jacot22_fig2.verdict(o, full=True).passed


def test_jacot22_fig1_groups_forces_and_merge(tmp_path):
    from repcost.figures import jacot22_fig1

    runs = _runs(tmp_path, "jacot22-fig1-quick", "seed", (0,), "model.width=12", "train.phases.0.steps=100",
                 "train.phases.1.steps=100", "train.phases.2.polish=0")  # the polish: tests/test_polish.py
    rows = jacot22_fig1.compute(runs)
    assert [r["layer"] for r in rows] == [1, 2]
    for r in rows:
        assert 1 <= r["groups"] <= 12 - r["dead"] and sum(map(int, r["group_sizes"].split())) == 12 - r["dead"]
        assert 0.0 <= r["force_balance"] <= 1.0
    # Jacot 2022 Prop 1: the reformulated loss minimises over the weights that give these representations,
    # so it is at most the objective (equal at a critical point)
    assert rows[0]["reformulated"] <= rows[0]["original"] * (1 + 1e-9)
    assert len(jacot22_fig1.plot(rows).axes) == 4
    three = [dict(r, groups=3) for r in rows]
    assert jacot22_fig1.verdict(three, full=True).passed is True
    five = [three[0], dict(three[1], groups=5)]
    assert jacot22_fig1.verdict(five, full=True).passed is False
    _decides_per_seed_by_majority(jacot22_fig1.verdict, three, five)


def test_ongie22_fig3_and_fig2_on_tiny_runs(tmp_path):
    from repcost.figures import ongie22_fig2, ongie22_fig3

    runs = _runs(tmp_path, "ongie22-fig3-quick", "model.depth", (2, 3), "model.width=6", "train.phases.0.steps=40")
    rows = ongie22_fig3.compute(runs)
    trained = [r for r in rows if r["kind"] == "trained"]
    built = [r for r in rows if r["kind"] != "trained"]
    assert [r["L"] for r in trained] == [2, 3] and len(built) == 2
    assert all(r["max_interp_error"] < 1e-9 for r in built)  # §5.2's f and g interpolate the samples
    assert len(ongie22_fig3.plot(rows).axes) >= 4
    aligned = [dict(r, s2_over_s1=0.01, v1_angle_to_w0_deg=2.0, unit_angle_to_rays_deg=3.0) if r["kind"] == "trained"
               else r for r in rows]
    assert ongie22_fig3.verdict(aligned, full=True).passed is True
    assert ongie22_fig3.verdict([dict(r, s2_over_s1=0.5) if r.get("L") == 3 else r for r in aligned],
                                full=True).passed is False
    from repcost.config import compose_config, validate
    from repcost.figures import preset_name

    f4 = validate(compose_config([f"experiment={preset_name('ongie22-fig4', False)}"])).data
    rows2 = ongie22_fig2.compute((runs, f4))
    clean = [r for r in rows2 if r["kind"] == "clean f vs g"]
    assert len(clean) == 1 and clean[0]["R2_f"] < clean[0]["R2_g"]  # Prop 5.2: R2(f) < R2(g) always
    assert len(ongie22_fig2.plot(rows2).axes) >= 4


@pytest.mark.slow
def test_jacot23_fig3_denoising_rows_on_tiny_autoencoders(tmp_path):
    from repcost.figures import jacot23_fig3

    mnist = _runs(tmp_path / "m", "jacot23-fig3-mnist-quick", "model.depth", (2, 3), "model.width=8",
                  "data.n_train=40", "data.n_test=24", "train.phases.0.steps=20")
    curve = _runs(tmp_path / "c", "jacot23-fig3-curve-quick", "model.depth", (2, 3), "model.width=8",
                  "train.phases.0.steps=20")
    rows = jacot23_fig3.compute((mnist, curve))
    panels = [r["panel"] for r in rows]
    assert panels.count("A mnist") == 2 * len(jacot23_fig3.MNIST_SIGMAS) and panels.count("B/C curve") == 2
    # the PCA baselines need k ≤ min(N, d): with N = 40 training images only k = 25 applies
    assert sorted({r["pca_k"] for r in rows if r["panel"] == "A mnist PCA"}) == [25]
    assert len(jacot23_fig3.plot(rows).axes) >= 4
    good = [dict(r, ratio=0.3 if r.get("depth") == 3 else 0.8, uniform_ratio=0.3 if r.get("depth") == 3 else 0.8)
            if r["panel"] != "A mnist PCA" else r for r in rows]
    assert jacot23_fig3.verdict(good, full=True).passed is True
    bad = [dict(r, ratio=0.9) if r["panel"] == "B/C curve" else r for r in good]
    assert jacot23_fig3.verdict(bad, full=True).passed is False
    for rows_ in (good, bad):  # the quick variant decides by the same rule
        assert jacot23_fig3.verdict(rows_, full=False).passed is jacot23_fig3.verdict(rows_, full=True).passed
    # several seeds: each judged on its own nets (the PCA baselines serve all), reproduced when most are
    pca = [r for r in good if r["panel"] == "A mnist PCA"]
    def seeds(*ok):
        return pca + [dict(r, seed=i) for i, o in enumerate(ok) for r in (good if o else bad) if r["panel"] != "A mnist PCA"]
    two_of_three = jacot23_fig3.verdict(seeds(True, False, True), full=False)
    assert two_of_three.passed is True and "in 2/3 seeds" in two_of_three.text
    assert jacot23_fig3.verdict(seeds(False, False, True), full=False).passed is False
    # the full presets: MNIST over three seeds, the curve over one; each panel is judged on its own seeds
    mnist3 = [dict(r, seed=i) for i in range(3) for r in good if r["panel"] == "A mnist"]
    curve1 = [r for r in good if r["panel"] == "B/C curve"]
    assert jacot23_fig3.verdict(pca + mnist3 + curve1, full=True).passed is True
    bad_curve = [r for r in bad if r["panel"] == "B/C curve"]
    assert jacot23_fig3.verdict(pca + mnist3 + bad_curve, full=True).passed is False


def test_ongie22_fig5_projection_interpolants():
    """Lifted 1-D interpolants interpolate, and their numerical Φ3 matches Cor 3.6's closed form R2^(2/3)."""
    import argparse
    import math

    from repcost.figures import ongie22_fig5

    data, _ = ongie22_fig5.inputs(argparse.Namespace(full=False, full_only=[]))
    rows = ongie22_fig5.compute((data, np.linspace(0.0, 180.0, 12, endpoint=False)))
    finite = [r for r in rows[:-1] if math.isfinite(r["R3"])]
    assert finite and all(r["max_interp_error"] < 1e-8 for r in finite)
    assert all(r["R3"] == pytest.approx(r["R3_cor36"], rel=1e-3) for r in finite)
    assert sum(r["is_span_w0"] for r in rows) == 1 and rows[-1]["phi_deg"] == "R^2 (f)"
    assert len(ongie22_fig5.plot(rows).axes) >= 5
    v = ongie22_fig5.verdict(rows, full=False)
    at_w0 = next(r for r in rows if r["is_span_w0"])
    assert v.passed == (max(r["R3"] for r in finite) > 2 * at_w0["R3"])
