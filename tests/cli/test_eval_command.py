"""python -m fastrl.eval as a process: a bad path is its exit status 2 and one line."""

from __future__ import annotations

import subprocess
import sys


def test_cli_exit_status_and_message_on_a_bad_path(tmp_path):
    missing = tmp_path / "missing"
    proc = subprocess.run([sys.executable, "-m", "fastrl.eval", str(missing)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"fastrl.eval: error: {missing} does not exist\n"

