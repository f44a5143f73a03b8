"""The code base stays ruff-clean (rules in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT


def test_ruff_clean():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "fastrl", "tests",
                           "benchmarks", "examples"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
