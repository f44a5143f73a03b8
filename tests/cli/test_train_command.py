"""python -m fastrl.train as a command: --help lists every key with its doc; a bad config is
one line without a traceback, exit status 2 (in this process through fastrl.train.main, and
once as a process of its own)."""

from __future__ import annotations

import pytest
from helpers import run_train, train_main

from fastrl.config import field_docs
from fastrl.train import main

BAD = [["infra.num_workers=0"], ["algo.nope=1"], ["missing.yaml"], ["env.id=NoSuchEnv-v9"],
       ["env.id=nosuchmodule:Env-v0"], ["env.kwargs.nope=1"],
       ["infra.envs_per_worker=100000000"]]  # 2.1 TiB of rings: more than /dev/shm holds


def test_help_lists_every_key_with_its_doc(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for key, _, _, doc in field_docs():
        assert key in out and doc.split()[0] in out


def assert_one_line_error(proc) -> None:
    """Exit status 2 and one line on stderr, no traceback."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fastrl.train: error:"), proc.stderr


@pytest.mark.parametrize("args", BAD)
def test_cli_bad_config_is_one_line_no_traceback(args, tmp_path, no_shm_residue, capfd):
    assert_one_line_error(train_main(args, tmp_path, capfd))


def test_cli_bad_config_as_a_process_exits_2_with_one_line(tmp_path, no_shm_residue):
    assert_one_line_error(run_train(BAD[0], tmp_path, timeout=120))


def test_rings_larger_than_dev_shm_are_bad_input_naming_the_room(tmp_path, no_shm_residue,
                                                                   capfd):
    proc = train_main(BAD[-1], tmp_path, capfd)
    assert_one_line_error(proc)
    assert "bytes of shared memory" in proc.stderr and "/dev/shm holds" in proc.stderr
