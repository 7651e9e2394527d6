"""Start-up of repcost-train: the modules an import, --help and a run load; fit.png drawn after FINISHED."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import pytest
from helpers import REPO, TINY, slow_but


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print('MODULES', *sys.modules)"],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    return {m.split(".")[0] for m in out.split("MODULES", 1)[1].split()}


@pytest.mark.slow  # several seconds of process starts and training
def test_import_and_help_load_no_heavy_modules(tmp_path):
    heavy = {"torch", "matplotlib", "scipy", "cvxpy", "tensorboard", "submitit", "sklearn", "pandas"}
    assert not heavy & _modules_after("import repcost, repcost.cli.train, repcost.config.compose")
    loaded = _modules_after("import sys; sys.argv = ['repcost-train', '--help']\n"
                            "from repcost.cli.train import main; main()")
    assert not heavy & loaded
    assert not {"scipy", "cvxpy", "matplotlib"} & _modules_after("import repcost.analysis, repcost.models")
    # a run's own modules, up to its first step: scipy and matplotlib load only for the final certificate and figure
    assert not {"scipy", "cvxpy", "matplotlib", "tensorboard", "submitit"} & _modules_after(
        "import repcost.cli.collect, repcost.train.job, repcost.train.run, repcost.analysis.hooks, "
        "repcost.analysis.critical")
    import repcost
    import repcost.analysis as analysis

    assert repcost.load_run.__module__ == "repcost.api" and callable(analysis.cost_CL)
    p = subprocess.run([sys.executable, "-m", "repcost.cli.train", "--help"], capture_output=True, text=True,
                       cwd=tmp_path)
    assert p.returncode == 0 and "model: fc, linear_relu, parallel" in p.stdout and "threads: auto" in p.stdout
    v = subprocess.run([sys.executable, "-m", "repcost.cli.train", "--version"], capture_output=True, text=True,
                       cwd=tmp_path)
    assert v.returncode == 0 and v.stdout.startswith(f"repcost-train {version('repcost')} (Hydra ")
    assert not list(tmp_path.iterdir())



@pytest.mark.slow  # several seconds of process starts and training
def test_a_run_loads_matplotlib_only_after_finishing_and_draws_its_figure(tmp_path):
    """The run's own process: the final certificate's solves (duality gap by Clarabel, Clarke measure at its kinks by
    scipy's bounded least squares); fit.png drawn in process once FINISHED is written."""
    run = tmp_path / "run"
    code = ("import sys; from repcost.cli.train import main\n"
            "import repcost.rundir as rd; finish = rd.RunDir.finish\n"
            "def noted(*a, **k):\n"
            "    print('AT FINISH', 'matplotlib' in sys.modules); return finish(*a, **k)\n"
            "rd.RunDir.finish = noted\n"
            f"sys.argv = ['repcost-train', 'train=certified', 'hydra.run.dir={run}', *{TINY!r}]; main()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["critical.kinks"] > 0 and summary["critical.clarke_stationarity"] >= 0  # the Clarke measure was solved
    assert "certify.duality_gap" in summary
    assert "AT FINISH False" in out.stdout  # matplotlib loads for the figure, after the run's files
    assert (run / "figures" / "fit.png").read_bytes().startswith(b"\x89PNG")
    assert (run / "figures" / "fit.png").stat().st_mtime >= (run / "FINISHED").stat().st_mtime


@pytest.mark.parametrize("fault", slow_but(["figures is a file", "file-size limit"]))
def test_a_figure_that_cannot_be_written_is_a_warning_not_a_lost_run(tmp_path, fault):
    """figures/fit.png is written last: a disk that fills or a limit reached there costs the figure only; the run
    ends finished (checkpoint, summary, FINISHED), exit 0, with one warning line, also in train.log."""
    import resource

    run = tmp_path / "run"
    run.mkdir()
    limit = None
    if fault == "figures is a file":
        (run / "figures").write_text("in the way\n")
    else:  # room for every file of the run but the figure (Python ignores SIGXFSZ: the write fails with EFBIG)
        limit = 16 * 1024

    def limited() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    p = subprocess.run([sys.executable, "-m", "repcost.cli.train", f"hydra.run.dir={run}", *TINY],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300, preexec_fn=limited)
    assert p.returncode == 0, p.stderr
    assert (run / "FINISHED").exists() and (run / "checkpoint.pt").exists() and (run / "summary.json").exists()
    warned = [ln for ln in (p.stdout + p.stderr).splitlines() if "fit.png" in ln]
    assert len(warned) == 1 and warned[0].startswith("warning: cannot write") and "Traceback" not in p.stderr
    assert "fit.png" in (run / "train.log").read_text()
    assert not (run / "figures" / "fit.png").is_file()


@pytest.mark.slow  # an end-to-end CLI run of several seconds
def test_repcost_train_imports_torch_out_of_the_collectors_reach():
    code = ("import gc, sys; {}from repcost.cli.train import _import_torch; _import_torch(); "
            "print('torch' in sys.modules, gc.isenabled(), gc.get_freeze_count() > 10**5)")
    for before, enabled in (("", "True"), ("gc.disable(); ", "False")):
        out = subprocess.run([sys.executable, "-c", code.format(before)], capture_output=True, text=True, cwd=REPO)
        assert out.stdout.split() == ["True", enabled, "True"], out.stderr
    # torch loaded already (the CLI called in a notebook or a test): the host process's objects stay the collector's
    out = subprocess.run([sys.executable, "-c", code.format("import torch; ")], capture_output=True, text=True,
                         cwd=REPO)
    assert out.stdout.split() == ["True", "True", "False"], out.stderr
