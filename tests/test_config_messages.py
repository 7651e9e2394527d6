"""Refused configs and command-line misuse: one line naming the key or the fix, no directory left behind."""

from __future__ import annotations


import pytest

from repcost.errors import RepcostError

from helpers import TINY, slow_but


REFUSED = {  # override -> what the one line says (a type, a typo, a mismatch found after locking, a plugin name)
    "model.depth=three": "invalid config: model.depth='three'; allowed: an integer >= 2",
    "model.widht=30": "model.widht is not a key of this config; did you mean model.width?",
    "train.loss=cross_entropy": "needs a classification dataset",
    "model.name=resrelu": "plugins=[mypkg.module]",
}


@pytest.mark.parametrize("override", slow_but(list(REFUSED)))
def test_a_refused_config_is_one_line_and_leaves_no_directory(tmp_path, run_cli, override):
    p = run_cli("repcost-train", override, *TINY, cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [f"repcost-train: error: {p.stderr.split('error: ', 1)[1].strip()}"]
    assert REFUSED[override] in p.stderr
    assert not list(tmp_path.iterdir()), list(tmp_path.rglob("*"))


@pytest.mark.slow  # several seconds of process starts and training
def test_a_refused_config_keeps_a_directory_that_existed(tmp_path, run_cli):
    run = tmp_path / "mine"
    run.mkdir()
    p = run_cli("repcost-train", "train.loss=cross_entropy", *TINY, f"hydra.run.dir={run}", cwd=tmp_path)
    assert p.returncode == 2 and run.is_dir()


def _compose_error(overrides: list[str]) -> str:
    from repcost.config import compose_config, validate

    with pytest.raises(RepcostError) as e:  # Hydra's composition errors too, worded as repcost-train words them
        validate(compose_config(overrides))
    return str(e.value)


@pytest.mark.parametrize("overrides, says", [
    (["model.depth=three"], "model.depth='three'; allowed: an integer >= 2"),
    (["model.init_scale=big"], "model.init_scale='big'; allowed: a positive number"),
    (["train.progress=maybe"], "train.progress='maybe'; allowed: true or false"),
    (["train.phases.0.steps=1.5"], "train.phases.0.steps=1.5; allowed: an integer >= 0"),
    (["train.phases=5"], "train.phases=5; allowed: a list of sections (each a mapping of its keys)"),
    (["+train.certify.phases=[{lr: -1}]"], "train.certify.phases.0.lr=-1.0; allowed: a finite learning rate > 0"),
    (["analysis.critical.max_kinks=abc"], "analysis.critical.max_kinks='abc'; allowed: an integer >= 0"),
    (["data=mnist", "data.digits=seven"], "data.digits='seven'; allowed: null (all ten) or a non-empty list"),
    (["model.widht=30"], "model.widht is not a key of this config; did you mean model.width?"),
    (["trian.lam=1"], "did you mean train.lam"),
    (["+model.widht=30"], "did you mean model.width?"),
    (["model=fcc"], "unknown model 'fcc'; did you mean fc? (allowed: fc, linear_relu, parallel)"),
    (["hydra/launcher=paralel"], "unknown hydra/launcher 'paralel'; did you mean parallel?"),
    (["model=resrelu"], "its model/resrelu.yaml goes in a --config-dir and its module in plugins=[mypkg.module]"),
    (["model.name=resrelu"], "allowed: one of fc, linear_relu, parallel; a plugin's name? load its module with "
                             "plugins=[mypkg.module]"),
    (["data.name=rnig"], "plugins=[mypkg.module]"),
])
def test_config_messages(overrides, says):
    msg = _compose_error([*overrides, "device=cpu"])
    assert says in msg and "\n" not in msg and "could not be converted" not in msg


def test_command_line_misuse_is_one_line_naming_the_fix(tmp_path, run_cli):
    from repcost.cli.train_args import check_argv

    with pytest.raises(RepcostError, match="options go before the overrides: repcost-train --config-dir /c seed=1 "
                                           "seed=2"):
        check_argv(["seed=1", "--config-dir", "/c", "seed=2"])
    with pytest.raises(RepcostError, match="unknown option --confg-dir; did you mean --config-dir"):
        check_argv(["--confg-dir", "/c"])
    with pytest.raises(RepcostError, match="--config-dir/-cd: expected one argument"):
        check_argv(["--config-dir"])
    with pytest.raises(RepcostError, match="--cfg/-c: not allowed with argument --multirun/-m"):
        check_argv(["-m", "--cfg", "job"])
    with pytest.raises(RepcostError, match="--cfg/-c: invalid choice: 'jb'"):
        check_argv(["--cfg", "jb"])
    check_argv(["--config-dir", "/c", "-m", "seed=1", "seed=2"])  # the right order passes
    check_argv(["seed=1", "-m"])  # options after all the overrides: argparse reads these
    p = run_cli("repcost-train", "seed=1", "--config-dir", str(tmp_path), "model.width=3", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "options go before" in p.stderr


@pytest.mark.parametrize("argv, says", slow_but([
    (["-m", "model.depth=2,", "3"], "write model.depth=2,3 (a list of values is one word"),
    (["model.depth=", "3"], "write model.depth=3"),
    (["model.width=[1,2"], "its brackets do not pair up")]))
def test_an_override_the_grammar_cannot_read_is_one_line_saying_what_to_write(tmp_path, run_cli, argv, says):
    p = run_cli("repcost-train", *argv, cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("repcost-train: error: cannot read the override") and says in p.stderr
    assert not list(tmp_path.iterdir())
