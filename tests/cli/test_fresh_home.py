"""A new user's first test run: with a fresh HOME (no ~/.cache/matplotlib, whose first
build runs fc-list) the unit tests that draw plots pass under the no-process guard."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT


@pytest.mark.timeout(300)
def test_plot_tests_pass_with_a_fresh_home(tmp_path):
    pytest.importorskip("matplotlib")  # (the test extra installs it)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
    env["HOME"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/bench/test_curve.py::test_a_run_s_curve_is_drawn_and_summarised",
         "tests/bench/test_bench.py::test_plot_is_written_when_matplotlib_is_there"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "2 passed" in proc.stdout
    assert (tmp_path / ".cache" / "matplotlib").is_dir()  # it was built here, from nothing
