"""Every failure a user can cause ends with one stderr line and exit 2, never a traceback.

Run in-process through the real entry points (`repcost.cli.*.main`), so the suite stays fast;
a few cases that need a separate process (a file-size limit) run through the CLI.
"""

from __future__ import annotations

import csv
import json
import os
import pickle
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from repcost.cli import analyze as analyze_cli
from repcost.cli import collect as collect_cli
from repcost.cli import train as train_cli
from helpers import BAD_CONFIGS, QUICK, assert_one_line, in_process, slow_but, train




# -- config values, presets, options (validated before any work starts) ---------------------------



@pytest.mark.parametrize("overrides,needle", BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_is_one_line(tmp_path, overrides, needle):
    code, _, err = train([*QUICK, *overrides.split(), f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert_one_line(code, err, needle)
    assert not (tmp_path / "run" / "checkpoint.pt").exists()  # refused before any training


# -- CLI misuse -------------------------------------------------------------------------------------
def test_resume_misuse(tmp_path):
    assert_one_line(*[train(["--resume"], tmp_path)[i] for i in (0, 2)], "--resume needs a run directory")
    code, _, err = train(["--resume", str(tmp_path / "nope")], tmp_path)
    assert_one_line(code, err, "not a run directory")
    (tmp_path / "f").write_text("x")
    code, _, err = train(["--resume", str(tmp_path / "f")], tmp_path)
    assert_one_line(code, err, "not a run directory")


@pytest.mark.parametrize("argv,needle", [
    ([], "the following arguments are required"), (["--bogus", "x"], "unrecognized arguments"),
    (["DIR"], "not a repcost run directory"), (["RUN", "analysis.n_points"], "not key=value"),
    (["RUN", "analysis=nosuch"], "unknown analysis"), (["RUN", "model=parallel"], "holds a linear_relu model"),
    (["RUN", "analysis.options.which=bogus"], "analysis.options.which")],
    ids=["no-args", "unknown-flag", "not-a-run", "bad-override", "bad-group", "other-model", "bad-option"])
def test_analyze_misuse(tmp_path, preempted_run, argv, needle):
    argv = [str(tmp_path) if a == "DIR" else str(preempted_run) if a == "RUN" else a for a in argv]
    code, _, err = in_process(analyze_cli.main, "repcost-analyze", argv, tmp_path)
    assert_one_line(code, err, needle)


@pytest.mark.parametrize("argv,needle", [([], "required"), (["EMPTY", "--x"], "unrecognized"), (["NOPE"], "no such directory"),
                                         (["EMPTY"], "no sweep jobs")], ids=["no-args", "flag", "missing", "empty"])
def test_collect_misuse(tmp_path, argv, needle):
    (tmp_path / "empty").mkdir()
    argv = [str(tmp_path / "nope") if a == "NOPE" else str(tmp_path / "empty") if a == "EMPTY" else a for a in argv]
    code, _, err = in_process(collect_cli.main, "repcost-collect", argv, tmp_path)
    assert_one_line(code, err, needle)


@pytest.mark.parametrize("out", ["RUN", "RUN/analysis", "RUN/sub/x", "RUN/.hydra", "RUN/reanalysis/../analysis"])
def test_analyze_refuses_an_out_inside_the_run(tmp_path, preempted_run, out):
    """--out inside a run directory is allowed only under RUN/reanalysis/: one line, exit 2, nothing written."""
    d = tmp_path / "run"
    shutil.copytree(preempted_run, d)
    before = sorted(p.relative_to(d) for p in d.rglob("*"))
    code, _, err = in_process(analyze_cli.main, "repcost-analyze",
                         [str(d), "--out", out.replace("RUN", str(d)), "analysis.n_points=3"], tmp_path)
    assert_one_line(code, err, "--out", "inside the run directory", str(d / "reanalysis"))
    assert sorted(p.relative_to(d) for p in d.rglob("*")) == before


def test_analyze_out_under_reanalysis_with_overrides_after_the_options(tmp_path, preempted_run):
    d = tmp_path / "run"
    shutil.copytree(preempted_run, d)
    before = {p.relative_to(d): p.read_bytes() for p in d.rglob("*") if p.is_file()}
    code, out, err = in_process(analyze_cli.main, "repcost-analyze", [str(d), "analysis=spectra", "--out",
                           str(d / "reanalysis" / "mine"), "analysis.n_points=3"], tmp_path)
    assert code == 0, err
    summary = json.loads((d / "reanalysis" / "mine" / "analysis" / "summary.json").read_text())
    assert summary["overrides"] == ["analysis=spectra", "analysis.n_points=3"]
    after = {p.relative_to(d): p.read_bytes() for p in d.rglob("*") if p.is_file()}
    assert {k: v for k, v in after.items() if k.parts[0] != "reanalysis"} == before
    (tmp_path / "f").write_text("x")
    code, _, err = in_process(analyze_cli.main, "repcost-analyze", [str(d), "--out", str(tmp_path / "f")], tmp_path)
    assert_one_line(code, err, "is a file")


def _job(sweep: Path, name: str, summary: str | None = '{"objective": 1.5, "status": "finished"}',
         overrides: str = "- seed=0\n") -> Path:
    d = sweep / name
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(overrides)
    if summary is not None:
        (d / "summary.json").write_text(summary)
    (d / "FINISHED").write_text("x")
    return d


def test_collect_skips_unreadable_jobs_with_one_warning_each(tmp_path):
    sweep = tmp_path / "sweep"
    _job(sweep, "good")
    _job(sweep, "truncated", summary='{"objective": 1.5, "sta')
    _job(sweep, "notdict", summary="[1, 2]")
    _job(sweep, "badyaml", overrides="- seed=0\n  - : [\n")
    _job(sweep, "yamldict", overrides="seed: 0\n")
    _job(sweep, "binary", summary=None).joinpath("summary.json").write_bytes(b"\xff\xfe\x00garbage")
    code, out, err = in_process(collect_cli.main, "repcost-collect", [str(sweep), "--allow-missing"], tmp_path)
    assert code == 0 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 5 and all(ln.startswith("repcost-collect: warning: ") and ln.endswith("; job left out of runs.csv")
                               for ln in lines)
    for job, file in (("truncated", "summary.json"), ("notdict", "summary.json"), ("binary", "summary.json"),
                      ("badyaml", ".hydra/overrides.yaml"), ("yamldict", ".hydra/overrides.yaml")):
        assert sum(str(sweep / job / file) in ln for ln in lines) == 1, (job, err)
    rows = list(csv.DictReader(open(sweep / "runs.csv")))
    assert [r["job"] for r in rows] == ["good"] and "1 jobs (1 finished)" in out


def test_collect_with_no_readable_job_is_one_line(tmp_path):
    sweep = tmp_path / "sweep"
    _job(sweep, "a", summary="{")
    _job(sweep, "b", overrides="[")
    code, _, err = in_process(collect_cli.main, "repcost-collect", [str(sweep)], tmp_path)
    assert_one_line(code, err, "none of its 2 job(s) could be read", "summary.json")
    assert not (sweep / "runs.csv").exists()


# -- checkpoints ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def preempted_run(tmp_path_factory) -> Path:
    """An unfinished run (its checkpoint written every step, killed in spirit: no FINISHED)."""
    d = tmp_path_factory.mktemp("pre") / "run"
    code, _, err = train([*QUICK, "train.checkpoint_every=2", f"hydra.run.dir={d}"], d.parent)
    assert code == 0, err
    (d / "FINISHED").unlink()
    (d / "summary.json").unlink()
    return d


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def _corrupt(kind: str, path: Path) -> None:
    data = path.read_bytes()
    content = {"truncated": data[: len(data) // 2], "random": os.urandom(4096), "empty": b"",
               "foreign": None, "malicious": pickle.dumps(_Evil())}[kind]
    if kind == "foreign":
        torch.save({"weights": torch.zeros(3)}, path)
    else:
        path.write_bytes(content)


@pytest.mark.parametrize("kind", ["truncated", "random", "empty", "foreign", "malicious"])
def test_bad_checkpoint_on_resume_is_named(tmp_path, preempted_run, kind):
    d = tmp_path / "run"
    shutil.copytree(preempted_run, d)
    _corrupt(kind, d / "checkpoint.pt")
    code, _, err = train(["--resume", str(d)], tmp_path)
    assert_one_line(code, err, f"cannot read checkpoint {d / 'checkpoint.pt'}", "force=true")
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()  # the pickle never ran
    code, _, err = train(["--resume", str(d), "force=true"], tmp_path)  # force moves it aside and starts over
    assert code == 0, err
    assert (d / "FINISHED").exists() and len(list(tmp_path.glob("run.stale-*"))) == 1


# -- output I/O faults -------------------------------------------------------------------------------
def test_run_dir_under_a_regular_file(tmp_path):
    (tmp_path / "file").write_text("x")
    code, _, err = train([*QUICK, f"hydra.run.dir={tmp_path / 'file' / 'run'}"], tmp_path)
    assert code == 2 and "Traceback" not in err
    assert "repcost-train: error:" in err.strip().splitlines()[-1]


@pytest.mark.parametrize("errno_name,needle", [("EROFS", "read-only file system"), ("ENOSPC", "no space left"),
                                               ("EACCES", "permission denied")])
def test_write_faults_are_one_line(tmp_path, monkeypatch, errno_name, needle):
    """Read-only, full and forbidden file systems, simulated at os.open (root can write anywhere here)."""
    import errno

    real_open = os.open

    def faulty(path, flags, *a, **k):
        if flags & os.O_WRONLY and "summary.json" in str(path):
            raise OSError(getattr(errno, errno_name), os.strerror(getattr(errno, errno_name)))
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", faulty)
    code, _, err = train([*QUICK, f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert_one_line(code, err, "cannot write", needle)
    assert not (tmp_path / "run" / "FINISHED").exists()


@pytest.mark.slow
def test_file_size_limit_keeps_the_last_good_checkpoint(tmp_path):
    """A file-size limit hit while checkpointing ends in one line; the checkpoint on disk stays a whole one."""
    d = tmp_path / "run"
    args = [sys.executable, "-m", "repcost.cli.train", *QUICK, "model=fc", "model.width=300", "train.checkpoint_every=1",
            f"hydra.run.dir={d}"]
    limit = 400_000  # bytes: metrics and small files fit, a checkpoint of 90k float64 weights does not

    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    p = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, preexec_fn=cap, timeout=300)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "file too large" in lines[-1] and "checkpoint.pt" in lines[-1]
    assert not (d / "checkpoint.pt").exists() or torch.load(d / "checkpoint.pt", weights_only=True)
    assert not list(d.glob(".checkpoint.pt.*"))  # no temp file left behind


# -- divergence ------------------------------------------------------------------------------------
def test_divergence_is_a_failure_and_a_relaunch_starts_over(tmp_path):
    d = tmp_path / "run"
    args = [*QUICK, "train.phases.0.lr=1e8", "train.phases.0.steps=50", f"hydra.run.dir={d}"]
    code, _, err = train(args, tmp_path)
    assert_one_line(code, err, "run failed")
    assert (d / "error.txt").exists() and not (d / "FINISHED").exists()
    code, _, err = train(args, tmp_path)  # relaunch: the failed attempt is moved aside, not resumed
    assert code == 2
    assert len(list(tmp_path.glob("run.stale-*"))) == 1


# -- MNIST sources -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,needle", [("missing", "MNIST"), ("garbage", "bad magic number"),
                                         ("truncated", "truncated")])
def test_bad_mnist_source_is_one_line(tmp_path, kind, needle):
    root = tmp_path / "mnist"
    if kind != "missing":
        root.mkdir()
        img = (b"\x00\x00\x08\x03" + (2).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2 + bytes(2 * 784))
        lab = b"\x00\x00\x08\x01" + (2).to_bytes(4, "big") + bytes([3, 5])
        if kind == "garbage":
            img = os.urandom(100)
        else:
            img = img[:10]
        (root / "train-images-idx3-ubyte").write_bytes(img)
        (root / "train-labels-idx1-ubyte").write_bytes(lab)
    code, _, err = train([*QUICK, "model=fc", "data=mnist", f"data.root={root}", "data.n_train=2", "data.n_test=0",
                          f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert_one_line(code, err, needle)


# -- where runs and sweeps live (names, empty dirs, runs in sweeps, sweeps in runs) -------------------
@pytest.fixture(scope="module")
def failing_sweep(tmp_path_factory) -> tuple[Path, tuple[int, str, str]]:
    """A multirun of four jobs: two invalid (width 0), one diverging (lr 1e8), one finishing; (cwd, its outcome)."""
    cwd = tmp_path_factory.mktemp("sweep")
    argv = ["-m", "name=f", "model.width=0,4", "train.phases.0.lr=1e8,1e-3", "train.phases.0.steps=20",
            "train.phases.1.steps=0", "train.progress=false"]
    return cwd, train(argv, cwd)


@pytest.mark.parametrize("argv,needle", [
    (["-m", "name=../../etc", "seed=0"], "name='../../etc'"), (["-m", "name=a/b", "seed=0"], "name='a/b'"),
    (["-m", "name=..", "seed=0"], "name='..'"), (["-m", "name=", "seed=0"], "name=''"),
    (["name=../x"], "name='../x'"), (["model.name=../../x"], "model.name='../../x'"),
    (["data.name=a/b"], "data.name='a/b'"), (["hydra.run.dir="], "hydra.run.dir is empty"),
    (["-m", "hydra.sweep.dir=", "seed=0"], "hydra.sweep.dir is empty")],
    ids=["sweep-dotdot", "sweep-slash", "sweep-up", "sweep-empty", "run-name", "model-name", "data-name",
         "empty-run-dir", "empty-sweep-dir"])
def test_names_and_empty_dirs_are_refused_before_any_directory(tmp_path, argv, needle):
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    code, _, err = train([*argv, *QUICK], cwd)
    assert_one_line(code, err, needle)
    assert list(tmp_path.rglob("*")) == [tmp_path / "a", cwd]  # nothing created, inside or outside


def test_runs_stay_out_of_sweeps_and_sweeps_out_of_runs(tmp_path, failing_sweep, preempted_run):
    cwd, _ = failing_sweep
    sweep = cwd / "outputs" / "sweeps" / "f"
    before = sorted(p.name for p in sweep.iterdir())
    job = next(p for p in sweep.iterdir() if (p / "FINISHED").exists())
    for run_dir in (sweep, sweep / "new", job / "x"):
        code, _, err = train([*QUICK, f"hydra.run.dir={train_cli.quoted(str(run_dir))}"], tmp_path)
        assert_one_line(code, err, "hydra.run.dir=", "a sweep directory")
    assert sorted(p.name for p in sweep.iterdir()) == before
    for sweep_dir in (preempted_run, preempted_run / "sw"):
        code, _, err = train(["-m", *QUICK, f"hydra.sweep.dir={sweep_dir}", "seed=0,1"], tmp_path)
        assert_one_line(code, err, "hydra.sweep.dir=", "a run directory")
    assert not (preempted_run / "sw").exists() and not (preempted_run / "seed=0").exists()
    code, out, err = train(["--resume", str(job)], tmp_path)  # an existing job of the sweep may be resumed
    assert code == 0 and "already finished" in out, err


def test_a_value_climbing_out_of_the_sweep_dir_stays_inside():
    from repcost.config.compose import _job_dir

    assert _job_dir("data.root=a/b") == "data.root=a/b"  # plain sub-directories as before
    name = _job_dir("data.root=a/../../../../etc")
    assert "/" not in name and ".." in name


# -- sweeps with failed jobs ---------------------------------------------------------------------------
def test_a_multirun_with_failed_jobs_exits_non_zero_in_one_line(failing_sweep):
    cwd, (code, _, err) = failing_sweep
    assert code == 1 and "Traceback" not in err, err
    summary = [ln for ln in err.splitlines() if ln.startswith("repcost-train: error:")]
    assert len(summary) == 1 and "3 of 4 jobs failed" in summary[0], err
    first = Path(summary[0].split("see ", 1)[1].split("/error.txt")[0] + "/error.txt")
    assert first.is_file() and first.parent.parent == cwd / "outputs" / "sweeps" / "f"


@pytest.mark.slow  # several seconds of process starts and training
def test_the_relaunch_retries_only_the_failed_jobs(tmp_path):
    argv = ["-m", "name=r", "model.width=0,4", *QUICK]
    code, _, err = train(argv, tmp_path)
    assert code == 1 and "1 of 2 jobs failed" in err
    sweep = tmp_path / "outputs" / "sweeps" / "r"
    done, error = next(sweep.glob("model.width=4*")) / "FINISHED", next(sweep.glob("model.width=0*")) / "error.txt"
    stamps = done.stat().st_mtime_ns, error.stat().st_mtime_ns
    code, out, err = train(argv, tmp_path)
    assert code == 1 and "1 of 2 jobs failed" in err and "already finished" in out
    assert done.stat().st_mtime_ns == stamps[0]  # the finished job was not rerun
    assert error.stat().st_mtime_ns != stamps[1]  # the failed one was tried again
    code, _, err = train(["-m", "name=ok", "seed=0,1", *QUICK], tmp_path)
    assert code == 0 and "failed" not in err


@pytest.mark.slow  # several seconds of process starts and training
def test_a_relaunch_refused_by_finished_jobs_exits_non_zero_and_leaves_them_as_they_were(tmp_path):
    """A bad value of a key outside the run's identity (threads) reaches the finished jobs: each is refused, none is
    marked failed, and the tally says so in one line without promising that the same command retries them."""
    argv = ["-m", "name=t", "seed=0,1", *QUICK]
    assert train(argv, tmp_path)[0] == 0
    sweep = tmp_path / "outputs" / "sweeps" / "t"
    stamps = sorted(f.stat().st_mtime_ns for f in sweep.glob("*/FINISHED"))
    code, _, err = train([*argv, "threads=0"], tmp_path)
    tally = [ln for ln in err.splitlines() if ln.startswith("repcost-train: error:")]
    assert code == 1 and len(tally) == 1 and "2 of 2 jobs failed" in tally[0] and "threads=0" in tally[0], err
    assert "correct the command" in tally[0] and "same command" not in tally[0]
    assert sorted(f.stat().st_mtime_ns for f in sweep.glob("*/FINISHED")) == stamps and not list(sweep.glob("*/error.txt"))
    code, out, err = train(argv, tmp_path)
    assert code == 0 and out.count("already finished") == 2, err


# -- environment faults ------------------------------------------------------------------------------
@pytest.mark.parametrize("errno_name,needle", [("EACCES", "permission denied"), ("EROFS", "read-only file system")])
def test_an_unwritable_train_log_is_one_line(tmp_path, monkeypatch, errno_name, needle):
    """An existing run dir whose train.log cannot be opened (root can write anywhere here: simulated at open)."""
    import errno
    import logging

    d = tmp_path / "run"
    code, _, err = train([*QUICK, f"hydra.run.dir={d}"], tmp_path)
    assert code == 0, err
    real = logging.FileHandler._open

    def faulty(self):
        if str(d) in self.baseFilename:
            code = getattr(errno, errno_name)
            raise OSError(code, os.strerror(code), self.baseFilename)
        return real(self)

    monkeypatch.setattr(logging.FileHandler, "_open", faulty)
    code, _, err = train([*QUICK, f"hydra.run.dir={d}"], tmp_path)
    assert_one_line(code, err, f"cannot write {d / 'train.log'}", needle, "hydra.run.dir")


def _fail_writes(monkeypatch, names: tuple[str, ...], errno_code: int, after: int = 0) -> None:
    """os.open for writing raises OSError(errno_code) for files named `names`, after `after` such opens succeeded."""
    real_open, seen = os.open, [0]

    def faulty(path, flags, *a, **k):
        if flags & os.O_WRONLY and any(f".{n}." in Path(path).name or Path(path).name == n for n in names):
            seen[0] += 1
            if seen[0] > after:
                raise OSError(errno_code, os.strerror(errno_code), str(path))
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", faulty)


@pytest.mark.parametrize("names,after", slow_but([(("FINISHED",), 0), (("summary.json",), 0), (("checkpoint.pt",), 3),
                                                   (("FINISHED", "error.txt"), 0),
                                                   (("checkpoint.pt", "summary.json", "FINISHED", "error.txt"), 3)],
                                                  ((("checkpoint.pt", "summary.json", "FINISHED", "error.txt"), 3),)),
                         ids=["finished-marker", "summary", "late-checkpoint", "no-room-for-error-txt", "everything"])
def test_a_full_disk_late_in_a_run(tmp_path, monkeypatch, names, after):
    """ENOSPC at the end of a run: one line naming the file; error.txt where it can be written; never a checkpoint
    that claims `finished` without FINISHED; the relaunch trains the run to the end."""
    import errno

    d = tmp_path / "run"
    args = [*QUICK, "train.checkpoint_every=1", f"hydra.run.dir={d}"]
    with monkeypatch.context() as m:
        _fail_writes(m, names, errno.ENOSPC, after)
        code, _, err = train(args, tmp_path)
    assert_one_line(code, err, "cannot write", "no space left")
    assert not (d / "FINISHED").exists()
    assert (d / "error.txt").exists() == ("error.txt" not in names)
    ck = d / "checkpoint.pt"
    assert not ck.exists() or torch.load(ck, weights_only=True)["status"] != "finished"
    assert not list(d.glob(".*.tmp"))
    code, _, err = train(args, tmp_path)
    assert code == 0 and (d / "FINISHED").exists(), err


def test_finish_orders_its_writes(tmp_path, monkeypatch):
    """RunDir.finish: whichever write fails, no moment shows a finished checkpoint without FINISHED."""
    import errno

    from repcost.rundir import RunDir

    for name in ("checkpoint.pt", "summary.json", "FINISHED"):
        rd = RunDir(tmp_path / name)
        rd.save_checkpoint({"status": "running", "trainer": {}, "config_hash": "h"})
        with monkeypatch.context() as m:
            _fail_writes(m, (name,), errno.ENOSPC)
            with pytest.raises(Exception, match="no space left"):
                rd.finish({"status": "finished", "trainer": {}, "config_hash": "h"}, {"status": "finished"}, "h")
        assert rd.load_checkpoint()["status"] == "running" and rd.finished_hash() is None
        assert not list(rd.path.glob(".*.tmp"))
        rd.finish({"status": "finished", "trainer": {}, "config_hash": "h"}, {"status": "finished"}, "h")
        assert rd.load_checkpoint()["status"] == "finished" and rd.finished_hash() == "h"


PLUGIN_SOURCES = {"syntax": ("def f(:\n", "syntax error", "line 1"),
                  "raises": ("x = 1\nraise RuntimeError('no licence server')\n", "RuntimeError: no licence server",
                             "line 2"),
                  "exits": ("import sys\nsys.exit(3)\n", None, None),
                  "missing": (None, "cannot import plugin", "PYTHONPATH")}


@pytest.mark.parametrize("kind", ["syntax", "raises", "missing", "empty", "relative", "space"])
def test_a_failing_plugin_is_one_line(tmp_path, monkeypatch, kind):
    name = f"repcost_test_plugin_{kind}_{os.getpid()}"
    if kind in PLUGIN_SOURCES and PLUGIN_SOURCES[kind][0] is not None:
        (tmp_path / f"{name}.py").write_text(PLUGIN_SOURCES[kind][0])
    monkeypatch.syspath_prepend(str(tmp_path))
    value = {"empty": "''", "relative": ".foo", "space": "'a b'"}.get(kind, name)
    code, _, err = train([*QUICK, f"plugins=[{value}]", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    needles = PLUGIN_SOURCES[kind][1:] if kind in PLUGIN_SOURCES else ("plugins=", "absolute module names")
    assert_one_line(code, err, *needles)


@pytest.mark.parametrize("text,group", [("foo: [1, 2\nbar: }\n", "experiment"), ("a: b: c\n", "experiment"),
                                        ("name: fc\n\tdepth: 3\n", "model")], ids=["flow", "mapping", "tab"])
def test_invalid_yaml_in_a_config_dir_is_one_line(tmp_path, text, group):
    (tmp_path / "conf" / group).mkdir(parents=True)
    (tmp_path / "conf" / group / "bad.yaml").write_text(text)
    code, _, err = train(["--config-dir", str(tmp_path / "conf"), f"{group}=bad", *QUICK,
                          f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert_one_line(code, err, "invalid YAML in", str(tmp_path / "conf" / group / "bad.yaml"), "line")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("overrides,needle", [
    ("seed=100000000000000000000000", "seed="), ("seed=9223372036854775807 train.ensemble_size=2", "seed="),
    ("data.seed=100000000000000000000000", "data.seed="),
    ("model=fc data=teacher data.teacher_seed=100000000000000000000000", "data.teacher_seed=")])
def test_seeds_a_generator_cannot_take_are_refused(tmp_path, overrides, needle):
    code, _, err = train([*QUICK, *overrides.split(), f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert_one_line(code, err, needle, "2^63")


@pytest.mark.parametrize("overrides,needle", [
    ("model.width=1000000000", "model.width=1000000000"), ("model.depth=10000000", "model.depth=10000000"),
    ("train.ensemble_size=100000000", "train.ensemble_size=100000000"),
    ("model=parallel model.n_subnets=100000000", "model.n_subnets=100000000")])
def test_models_beyond_memory_are_refused_before_anything_is_built(tmp_path, monkeypatch, overrides, needle):
    import time

    from repcost.config import limits

    monkeypatch.setattr(limits, "available_bytes", lambda: 16 * 2**30)  # a 16 GiB machine
    t = time.perf_counter()
    code, _, err = train([*QUICK, *overrides.split(), f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert_one_line(code, err, needle, "the models need at least", "16 GiB available")
    assert time.perf_counter() - t < 30  # refused up front, nothing allocated
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("overrides,needle", [
    ("data.n_points=100000000000", "data.n_points=100000000000"),
    ("train.ensemble_size=2 data.n_points=100000000000", "data.n_points=100000000000"),
    ("model=fc data=teacher data.n_train=100000000000", "data.n_train=100000000000"),
    ("data=bipartite data.n=2000000", "data.n=2000000"), ("data=s_curves data.n_per_class=" + str(10**30), "data.n_per_class")])
def test_data_the_allocator_refuses_is_one_line(tmp_path, overrides, needle):
    """Data far beyond any machine: the allocator's own refusal, in one line naming the sizes, within seconds and
    with no run directory left behind."""
    import time

    t = time.perf_counter()
    code, _, err = train([*QUICK, *overrides.split(), f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert_one_line(code, err, needle, "cannot allocate the data")
    assert time.perf_counter() - t < 30
    assert not (tmp_path / "run").exists()


def test_allocating_turns_only_a_refused_size_into_one_line():
    """The allocator's refusal (CPU, CUDA, numpy) becomes a RepcostError naming the sizes; any other error passes."""
    from repcost.config import compose_config, validate
    from repcost.config.limits import allocating
    from repcost.errors import RepcostError

    spec = validate(compose_config(["model.width=7", "device=cpu"]))
    refusals = [RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes"),
                torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), MemoryError(),
                ValueError("Maximum allowed dimension exceeded")]
    for e in refusals:
        with pytest.raises(RepcostError, match="model.width=7.*cannot allocate the data"):
            with allocating(spec, "the data"):
                raise e
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes"):
        with allocating(spec, "the data"):
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")


@pytest.mark.parametrize("model", ["linear_relu model.depth=4 model.linear_width=7",
                                   "linear_relu model.depth=2 model.output_bias=false", "fc model.depth=4 model.width=[5,6,7]",
                                   "fc model.depth=2 model.beta=0", "parallel model.depth=3 model.n_subnets=4 model.width=3",
                                   "parallel model.depth=2 model.n_subnets=5"])
@pytest.mark.parametrize("d_in,d_out", [(1, 1), (3, 2)])
def test_a_declared_parameter_count_counts_what_is_built(model, d_in, d_out):
    """A family's `param_count(d_in, d_out)` (what the memory limit reads) equals the parameters of the model it
    builds."""
    from repcost.config import compose_config, validate
    from repcost.models import build_model

    spec = validate(compose_config([f"model={model.split()[0]}", *model.split()[1:], "device=cpu"]))
    m = build_model(spec.model, d_in, d_out, 0)
    assert spec.model.param_count(d_in, d_out) == sum(p.numel() for p in m.parameters())


@pytest.mark.slow  # several seconds of process starts and training
def test_library_warnings_go_to_train_log_not_stderr(tmp_path, run_cli):
    """A library's warnings.warn (here a plugin module's, at import) lands in train.log; stdout and stderr carry
    only repcost's own lines."""
    pkg = tmp_path / "pkgs"
    pkg.mkdir()
    (pkg / "noisy_lib.py").write_text("import warnings\nwarnings.warn('noisy library says hi', RuntimeWarning)\n")
    d = tmp_path / "run"
    p = run_cli("repcost-train", *QUICK, "plugins=[noisy_lib]", f"hydra.run.dir={d}", cwd=tmp_path,
                env={"PYTHONPATH": str(pkg)})
    assert p.returncode == 0, p.stderr
    assert "noisy library says hi" in (d / "train.log").read_text()
    assert "noisy library" not in p.stdout + p.stderr and "Warning" not in p.stderr


# -- stop signals during start-up ----------------------------------------------------------------------
def _signal_at(monkeypatch, target: str, sig=None) -> None:
    """Deliver `sig` (SIGTERM) to this process when `target` (module:attribute, a function) is called."""
    import importlib
    import signal

    mod_name, attr = target.split(":")
    mod = importlib.import_module(mod_name)
    while "." in attr:  # a method: Class.name
        owner, attr = attr.split(".", 1)
        mod = getattr(mod, owner)
    real = getattr(mod, attr)

    def wrapped(*a, **k):
        os.kill(os.getpid(), sig or signal.SIGTERM)
        return real(*a, **k)

    monkeypatch.setattr(mod, attr, wrapped)


@pytest.mark.parametrize("where", slow_but(["repcost.cli.guards:check_place", "repcost.train.job:run_plugin_sources",
                                             "repcost.train.run:open_run"], ("repcost.train.run:open_run",)), ids=["before-any-dir", "after-hydra", "locked"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_during_start_up_leaves_nothing_behind(tmp_path, monkeypatch, where, sig):
    import signal

    d = tmp_path / "run"
    with monkeypatch.context() as m:
        _signal_at(m, where, getattr(signal, sig))
        code, out, err = train([*QUICK, f"hydra.run.dir={d}"], tmp_path)
    assert code == 128 + getattr(signal, sig), err
    assert_one_line(2, err, f"interrupted by {sig} during start-up", "relaunch the same command")
    assert not d.exists()  # not even an empty train.log
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the guard is gone with the command
    code, _, err = train([*QUICK, f"hydra.run.dir={d}"], tmp_path)  # the relaunch just runs
    assert code == 0 and (d / "FINISHED").exists(), err


def test_a_directory_a_killed_start_left_is_no_obstacle(tmp_path):
    """A start killed outright (SIGKILL) can leave a run dir holding only an empty train.log: the same command
    runs there, and --resume says what happened in one line."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "train.log").write_text("")
    code, _, err = train(["--resume", str(d)], tmp_path)
    assert_one_line(code, err, "its start was interrupted", "relaunch the original command")
    code, _, err = train([*QUICK, f"hydra.run.dir={d}"], tmp_path)
    assert code == 0 and (d / "FINISHED").exists(), err


def test_the_startup_guard_hands_signals_to_the_training(tmp_path, monkeypatch):
    """Once the run dir is set up, SIGTERM is the training's: it stops at the next step with a checkpoint."""
    d = tmp_path / "run"
    with monkeypatch.context() as m:
        _signal_at(m, "repcost.rundir:append_line")  # at the first metrics line
        code, out, err = train([*QUICK, "train.phases.0.steps=200", f"hydra.run.dir={d}"], tmp_path)
    assert code == 0 and "Traceback" not in err, err
    assert torch.load(d / "checkpoint.pt", weights_only=True)["status"] == "preempted"
    code, _, err = train(["--resume", str(d)], tmp_path)
    assert code == 0 and (d / "FINISHED").exists(), err


# -- library calls, and faults around runs and sweeps ----------------------------------------------------
def test_compose_config_refuses_what_repcost_train_refuses(tmp_path):
    from repcost.config import compose_config
    from repcost.errors import RepcostError

    with pytest.raises(RepcostError, match="^unknown experiment 'doesnotexist'; allowed: "):
        compose_config(["experiment=doesnotexist"])
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "nope", tmp_path / "file"):
        with pytest.raises(RepcostError, match="not a directory") as e:
            compose_config(["seed=1"], config_dirs=[bad])
        assert str(bad) in str(e.value) and "\n" not in str(e.value)
    assert compose_config(["experiment=ongie22-fig1-quick"]) != compose_config([])  # a preset still applies


@pytest.mark.parametrize("which", ["missing", "file"])
def test_analyze_refuses_a_config_dir_that_is_not_one(tmp_path, preempted_run, which):
    bad = tmp_path / "nope"
    if which == "file":
        bad.write_text("x")
    code, _, err = in_process(analyze_cli.main, "repcost-analyze", [str(preempted_run), "--config-dir", str(bad)], tmp_path)
    assert_one_line(code, err, "--config-dir", str(bad), "not a directory")
    assert not (preempted_run / "reanalysis").exists()


def test_a_run_dir_in_a_symlink_loop_is_one_line(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    code, _, err = train([*QUICK, f"hydra.run.dir={loop / 'run'}"], tmp_path)
    assert_one_line(code, err, str(loop))
    code, _, err = train([*QUICK, f"hydra.run.dir={loop}"], tmp_path)
    assert_one_line(code, err, str(loop))


def test_analyze_of_a_malicious_checkpoint_is_one_line(tmp_path, preempted_run, run_cli):
    """Through the console script: torch's unpickler warns through `warnings`, which pytest would capture in-process."""
    d = tmp_path / "run"
    shutil.copytree(preempted_run, d)
    _corrupt("malicious", d / "checkpoint.pt")
    p = run_cli("repcost-analyze", str(d), cwd=tmp_path)
    assert_one_line(p.returncode, p.stderr, str(d / "checkpoint.pt"))
    assert not (tmp_path / "PWNED").exists()


def _sweep_of(tmp_path: Path, good: int, bad: int) -> Path:
    sweep = tmp_path / "sweep"
    for i in range(good):
        _job(sweep, f"good{i}", overrides=f"- seed={i}\n")
    for i in range(bad):
        _job(sweep, f"bad{i}", summary='{"objective": 1.5, "sta')
    return sweep


def test_collect_that_leaves_a_job_out_says_so_in_its_exit_status(tmp_path):
    sweep = _sweep_of(tmp_path, 2, 1)
    code, out, err = in_process(collect_cli.main, "repcost-collect", [str(sweep)], tmp_path)
    *warnings, last = err.strip().splitlines()
    assert code == 1 and "Traceback" not in err and len(warnings) == 1 and str(sweep / "bad0") in warnings[0]
    assert last.startswith("repcost-collect: error: left out 1 of 3 jobs") and "--allow-missing" in last
    assert [r["job"] for r in csv.DictReader(open(sweep / "runs.csv"))] == ["good0", "good1"]  # the rest is written
    code, out, err = in_process(collect_cli.main, "repcost-collect", [str(sweep), "--allow-missing"], tmp_path)
    assert code == 0 and len(err.strip().splitlines()) == 1 and "2 jobs" in out


def test_collect_removes_temp_files_of_killed_writers(tmp_path):
    sweep = _sweep_of(tmp_path, 2, 0)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = [sweep / f".runs.csv.{dead}.tmp", sweep / f".layers.csv.{dead}.tmp"]
    for f in stale:
        f.write_text("job,seed\ngood0,")
    live = sweep / f".runs.csv.{os.getppid()}.tmp"  # a writer still running: not ours to remove
    live.write_text("x")
    code, _, err = in_process(collect_cli.main, "repcost-collect", [str(sweep)], tmp_path)
    assert code == 0, err
    assert not any(f.exists() for f in stale) and live.exists()


def test_a_stale_run_line_says_what_changed(tmp_path):
    d = tmp_path / "run"
    assert train([*QUICK, f"hydra.run.dir={d}"], tmp_path)[0] == 0
    code, _, err = train([*QUICK, "train.lam=0.5", "model.width=7", f"hydra.run.dir={d}"], tmp_path)
    assert_one_line(code, err, "holds a finished run of another config", "model.width", "train.lam", "0.5")



def test_what_changed_names_a_plugin_source_and_a_repcost_version():
    from omegaconf import OmegaConf

    from repcost.config import compose_config
    from repcost.identity import identity_changes
    from repcost.provenance import repcost_version

    cfg = OmegaConf.to_container(compose_config(["model.width=7"]), resolve=True)
    mine = {**cfg, "plugin_sources": {"mypkg.plugin": "aaaa"}}
    assert identity_changes(mine, {**mine, "plugin_sources": {"mypkg.plugin": "bbbb"}}) == "source of plugin mypkg.plugin"
    assert identity_changes(cfg, {**cfg, "seed": 3}) == "seed: 0 -> 3"
    same = identity_changes(cfg, dict(cfg), "0.0.1")  # same keys, another hash: the identity rules changed
    assert "repcost 0.0.1" in same and repcost_version() in same


_SIGNAL_WHILE_FINISHING = """
import os, signal, sys
import repcost.train.run as run
real = run._complete
def twice(*a, **k):  # two stop signals once training has ended, while the run's files are written
    for _ in range(2):
        os.kill(os.getpid(), signal.SIGTERM)
    return real(*a, **k)
run._complete = twice
from repcost.cli.train import main
sys.argv = ["repcost-train", *sys.argv[1:]]
main()
"""


@pytest.mark.slow  # an end-to-end CLI run of several seconds
def test_stop_signals_while_a_run_finishes_end_cleanly(tmp_path):
    d = tmp_path / "run"
    p = subprocess.run([sys.executable, "-c", _SIGNAL_WHILE_FINISHING, *QUICK, f"hydra.run.dir={d}"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert (d / "FINISHED").exists()
    code, out, err = train([*QUICK, f"hydra.run.dir={d}"], tmp_path)
    assert code == 0 and "already finished" in out, err
