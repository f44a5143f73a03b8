"""The guard of tests/conftest.py: a unit test that starts a process fails, whichever way it
starts it (the integration folders may)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess

import pytest

REFUSED = "is a unit test and started a process"


@pytest.mark.parametrize("start", [
    lambda: subprocess.run(["true"], check=True),
    lambda: os.system("true"),
    lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
    lambda: multiprocessing.get_context("fork").Process(target=print).start(),
    lambda: multiprocessing.get_context("forkserver").Process(target=print).start(),
], ids=["subprocess", "os.system", "spawn", "fork", "forkserver"])
def test_starting_a_process_fails_a_unit_test(start):
    with pytest.raises(AssertionError, match=REFUSED):
        start()
