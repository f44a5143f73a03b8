"""python -m fastrl.train as a process: --help lists every key with its doc; a bad config is
one line without a traceback, exit status 2."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import run_train

from fastrl.config import field_docs


def test_help_lists_every_key_with_its_doc():
    proc = subprocess.run([sys.executable, "-m", "fastrl.train", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0
    for key, _, _, doc in field_docs():
        assert key in proc.stdout and doc.split()[0] in proc.stdout


@pytest.mark.parametrize("args", [["infra.num_workers=0"], ["algo.nope=1"],
                                  ["missing.yaml"], ["env.id=NoSuchEnv-v9"],
                                  ["env.id=nosuchmodule:Env-v0"], ["env.kwargs.nope=1"]])
def test_cli_bad_config_is_one_line_no_traceback(args, tmp_path, no_shm_residue):
    proc = run_train(args, tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fastrl.train: error:"), proc.stderr

