"""Shared fixtures: scripted envs on the path, /dev/shm residue checks, run helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fastrl.memory.segments import leftover_segments

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))  # scripted_envs for this process...
os.environ["PYTHONPATH"] = os.pathsep.join(  # ...and for spawned / subprocess children
    p for p in (str(TESTS), os.environ.get("PYTHONPATH")) if p
)

# Small, fast runs for pipeline tests (override further per test).
TINY = [
    "infra.num_workers=2", "infra.envs_per_worker=2", "infra.rollout_len=16",
    "algo.num_minibatches=2", "algo.update_epochs=1", "log.eval_episodes=2",
    "log.console=false",
]


def ours_in_shm() -> set[str]:
    """fastrl's segments and multiprocessing's semaphores (our queues) in /dev/shm."""
    return set(leftover_segments()) | {n for n in os.listdir("/dev/shm") if n.startswith("sem.mp-")}


@pytest.fixture
def no_shm_residue():
    """Fail the test if it leaves anything of ours in /dev/shm."""
    before = ours_in_shm()
    yield
    left = ours_in_shm() - before
    assert not left, f"left in /dev/shm: {sorted(left)}"


def run_train(args: list[str], tmp_path: Path, timeout: float = 180, **kw):
    """``python -m fastrl.train`` in a subprocess with its run dir under ``tmp_path``."""
    cmd = [sys.executable, "-m", "fastrl.train", *args, f"log.run_dir={tmp_path}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
