"""Shared fixtures: scripted envs on the path, /dev/shm residue checks, run helpers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
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
ENDLESS = ["algo.total_steps=100000000", "algo.target_return=null"]


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


@pytest.fixture
def launch(tmp_path, no_shm_residue):
    """Start ``python -m fastrl.train`` (TINY unless ``tiny=False``) in its own session;
    whatever a test leaves running (the supervisor and its children, by pid) is killed
    afterwards, before the residue check."""
    started: list[subprocess.Popen] = []

    def _launch(args: list[str], tiny: bool = True, resume: Path | None = None):
        cmd = [sys.executable, "-m", "fastrl.train", *(TINY if tiny else []), *args]
        cmd += ["--resume", str(resume)] if resume else [f"log.run_dir={tmp_path}"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        started.append(proc)
        return proc

    yield _launch
    for proc in started:
        try:
            tree = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        # The supervisor first: its children die with it (PDEATHSIG) and its resource tracker
        # unlinks the segments; killing the tracker too would leave them in /dev/shm.
        proc.kill()
        proc.communicate(timeout=30)
        _, alive = psutil.wait_procs(tree, timeout=30)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        # children die with the supervisor (PDEATHSIG); give the tracker time to unlink
        deadline = time.monotonic() + 30
        while leftover_segments(f"{proc.pid}_") and time.monotonic() < deadline:
            time.sleep(0.1)


def run_dir_of(tmp_path):
    (d,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return d


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def spawned_children(proc: subprocess.Popen) -> list[psutil.Process]:
    """The supervisor's learner and workers, in start order (learner first)."""
    kids = [c for c in psutil.Process(proc.pid).children()
            if "spawn_main" in " ".join(c.cmdline())]
    return sorted(kids, key=lambda c: (c.create_time(), c.pid))


def wait_training(proc: subprocess.Popen, tmp_path, timeout: float = 120) -> list[psutil.Process]:
    """Wait until the learner has logged an update (TensorBoard file has grown)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = list(tmp_path.glob("*/tb/events.out.tfevents.*"))
        if events and events[0].stat().st_size > 2000 and len(spawned_children(proc)) >= 3:
            return spawned_children(proc)
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"run did not start training: {proc.communicate(timeout=30)}")


def wait_file(path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)


def all_gone(procs: list[psutil.Process], timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs):
            return True
        time.sleep(0.1)
    return False
