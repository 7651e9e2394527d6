"""Shared fixtures: small models and data, and a runner for the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def cli(prog: str, *args: str, cwd: Path, timeout: int = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a repcost console script (as `python -m`) in `cwd`; returns the completed process."""
    module = {"repcost-train": "repcost.cli.train", "repcost-analyze": "repcost.cli.analyze",
              "repcost-collect": "repcost.cli.collect"}[prog]
    e = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=e)


@pytest.fixture
def run_cli():
    """The `cli` helper as a fixture."""
    return cli


if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs two workers on two cores: one thread each
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _float64_default():
    torch.manual_seed(0)
    yield


class StopAfter:
    """A stop flag (repcost.train.preempt.StopFlag's interface) that 'receives SIGTERM' after `n` polls, one per step."""

    def __init__(self, n: int):
        self.n, self.signal = n, None

    def __bool__(self) -> bool:
        self.n -= 1
        if self.n < 0:
            self.signal = 15
        return self.signal is not None


# End-to-end scenarios of a minute or more each (sweeps through launchers, figure modules on real runs, several
# CLI processes in a row) whose parts each have a fast test: `make test` skips them, `make test-slow` (CI) runs them.
SLOW_SCENARIOS = {
    "test_figure_script.py::test_make_figures_prints_one_line_per_figure",
    "test_sweeps.py::test_joblib_sweep_collect_relaunch_and_killed_job",
    "test_sweeps.py::test_figure_rows_are_the_last_multiruns_jobs_only",
    "test_figure_modules.py::test_jacot23_fig3_denoising_rows_on_tiny_autoencoders",
    "test_figure_modules.py::test_savarese19_fig2_compute_plot_verdict",
    "test_figure_modules.py::test_jacot23_fig1_spectra_rows_and_rank_verdict",
    "test_stacked.py::test_preempted_stacked_sweep_resumes",
    "test_stacked.py::test_bad_launcher_options_are_one_line",
    "test_run_safety.py::test_sweep_relaunch_keeps_finished_and_moves_changed_jobs_aside",
    "test_run_safety.py::test_analyze_applies_overrides_on_a_run_without_analyses",
    "test_analysis_hooks.py::test_analyze_cli_reproduces_final_analysis",
    "test_analysis_hooks.py::test_analyze_bad_input_one_line_exit_2",
    "test_relu_1d.py::test_insert_units_bad_values_are_one_line_errors",
    "test_relu_1d.py::test_insert_units_is_part_of_the_run_identity",
    "test_figure_script.py::test_forces_script_on_a_collapsed_net_ends_with_one_line",
    "test_figure_script.py::test_figure_script_bad_override_ends_with_one_line",
    "test_plugins.py::test_analyze_reads_an_analysis_preset_from_a_user_config_dir",
    "test_cli.py::test_two_runs_same_second_get_two_dirs",
    "test_cli.py::test_bad_config_one_line_exit_2",
    "test_alignment.py::test_identity_input_min_cost_drops_to_n_squared_at_the_cp_rank",
    "test_bad_inputs.py::test_file_size_limit_keeps_the_last_good_checkpoint",
    "test_relu_1d.py::test_every_1d_two_layer_run_reports_its_gap",
    "test_plot.py::test_metric_curves_of_runs",
    "test_descent_probe.py::test_probe_bad_inputs_are_one_line",
    "test_certify.py::test_ensemble_members_stop_where_their_single_runs_do",
    "test_certify.py::test_a_run_preempted_inside_an_escalation_round_resumes_exactly",
    "test_stacked.py::test_stacked_sweep_equals_unstacked_and_is_reused",
    "test_descent_probe.py::test_probe_starts_at_the_run_and_only_descends",
    "test_everyday.py::test_a_plugin_source_change_makes_its_finished_run_stale",
    "test_sweeps.py::test_signal_checkpoint_and_exact_resume",
    "test_plot.py::test_sweep_plot_png_and_pdf",
    "test_figure_script.py::test_savarese_parallel_script_writes_png_and_csv",
    "test_certify.py::test_escalation_stops_as_soon_as_the_gap_certifies_and_a_smaller_budget_says_it_did_not",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        file_and_name = f"{item.path.name}::{item.originalname}"
        if file_and_name in SLOW_SCENARIOS:
            item.add_marker(pytest.mark.slow)
