"""Shared fixtures: tests/ on the path, the no-process guard of the unit folders, /dev/shm
residue checks, launching runs, a local Ray, and finished runs shared by read-only checks.

The layout: tests/<package> (core, memory, replay, envs, models, algos, learner, rollout, eval,
telemetry, bench) and the top-level test_*.py files are unit tests: they start no process,
and the guard below fails any test there that tries. Tests that run processes live in the
integration folders (INTEGRATION): runtime (the supervisor, faults, resume, serial, Ray),
cli (the commands as processes), e2e (the solves), examples. Helpers live in helpers.py."""

from __future__ import annotations

import _posixsubprocess
import multiprocessing.process
import multiprocessing.util
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))  # helpers, scripted_envs, user_policies for this process...
os.environ["PYTHONPATH"] = os.pathsep.join(  # ...and for spawned / subprocess children
    p for p in (str(TESTS), os.environ.get("PYTHONPATH")) if p
)

from helpers import (  # noqa: E402 - tests/ on the path
    STRAIGHT,
    TINY,
    ours_in_shm,
    shm_left,
    train_main,
)

from fastrl.memory.segments import leftover_segments  # noqa: E402

# Folders whose tests may start processes; every other test is a unit test and may not.
# (tests/docs belongs to the docs pages; its tests run in-process but are not guarded here.)
INTEGRATION = {"runtime", "cli", "e2e", "examples", "docs"}


# --- unit tests start no process ------------------------------------------------------------
class ProcessStarted(AssertionError):
    """A unit test (or a fixture it uses) tried to start a process."""


def is_unit(item: pytest.Item) -> bool:
    """Whether ``item`` is in a unit folder (or a top-level test module)."""
    parts = Path(item.path).relative_to(TESTS).parts
    return len(parts) == 1 or parts[0] not in INTEGRATION


@contextmanager
def no_processes(where: str):
    """Make every way this process starts another (fork, exec of a child, posix_spawn,
    multiprocessing) raise :class:`ProcessStarted` while the block runs."""
    def refuse(*args, **kwargs):
        raise ProcessStarted(
            f"{where} is a unit test and started a process: unit tests start none; move it "
            f"to an integration folder ({', '.join(sorted(INTEGRATION - {'docs'}))})")

    saved = [(os, name, getattr(os, name)) for name in ("fork", "forkpty", "posix_spawn",
                                                       "posix_spawnp", "system")
             if hasattr(os, name)]
    saved += [(module, name, getattr(module, name)) for module, name in (
        (_posixsubprocess, "fork_exec"), (subprocess, "_fork_exec"),
        (multiprocessing.util, "spawnv_passfds"),
        (multiprocessing.process.BaseProcess, "start")) if hasattr(module, name)]
    for owner, name, _ in saved:
        setattr(owner, name, refuse)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def pytest_sessionstart(session):
    """Things that start a process the first time they are asked, asked once before any
    test (cached from then on): the commit a checkpoint's manifest records (``git
    rev-parse``), and matplotlib's font list (its first import on a machine runs ``fc-list``
    and caches the answer in ~/.cache/matplotlib: a fresh HOME has none)."""
    from fastrl.checkpoint import git_sha

    git_sha()
    try:
        import matplotlib.font_manager  # noqa: F401 - the import builds the font list
    except ImportError:  # (the bench extra's; its tests skip without it)
        pass


def guarded(item):
    """A hook wrapper's body: a unit test's phase runs with no process started."""
    if is_unit(item):
        with no_processes(item.nodeid):
            yield
    else:
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """Fixtures of unit tests start no process either (a shared run is a serial one)."""
    yield from guarded(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """The test body of a unit test starts no process."""
    yield from guarded(item)


# --- /dev/shm and launched runs -------------------------------------------------------------
@pytest.fixture
def no_shm_residue():
    """Fail the test if it leaves anything of ours in /dev/shm (what live processes outside
    this session hold is theirs)."""
    before, since = ours_in_shm(), time.time()
    yield
    left = shm_left(before, since)  # (not what concurrent test sessions on the machine hold)
    assert not left, f"left in /dev/shm: {sorted(left)}"


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


# --- a local Ray ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_address():
    """A local Ray for the module, started here (as a user's cluster would be), with room
    for the runs' two worker actors and the tests' extra ones."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=3, include_dashboard=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


# --- finished runs that read-only checks share ----------------------------------------------
@pytest.fixture(scope="session")
def checkpointed_run(tmp_path_factory) -> Path:
    """A finished tiny PPO CartPole run (serial runtime: no process, no shared memory) with
    checkpoints at steps 512, 1024 and 1536. Tests read it; none may change it."""
    import torch

    from fastrl import Trainer
    from fastrl.config import load_config

    tmp = tmp_path_factory.mktemp("checkpointed")
    before, since, threads = ours_in_shm(), time.time(), torch.get_num_threads()
    torch.set_num_threads(1)  # a loaded 2-core machine: two threads make updates slower
    try:
        result = Trainer(load_config(None, [
            *TINY, "infra.runtime=serial", "infra.num_workers=1", "algo.total_steps=1536",
            "algo.target_return=null", "log.checkpoint_every_steps=512",
            f"log.run_dir={tmp}"])).fit()
    finally:
        torch.set_num_threads(threads)
    assert not shm_left(before, since), "the run left shared memory behind"
    assert result.global_step == 1536
    return result.run_dir


@pytest.fixture
def one_torch_thread():
    """One torch thread, as python -m fastrl.eval uses: a forward of a few observations on
    two threads waits for a busy core (10x slower on a loaded 2-core machine). Later tests
    get their thread count back."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def straight_run(tmp_path_factory):
    """``straight_run(workers, *overrides)``: the run folder of a finished uninterrupted
    local run of TINY + STRAIGHT with ``workers`` workers (and ``overrides``), made on first
    use and shared after that (the local and Ray stop-and-resume tests compare with it).
    Tests read it; none may change it."""
    made: dict[tuple, Path] = {}

    def get(workers: int, *overrides: str) -> Path:
        key = (workers, *overrides)
        if key not in made:
            tmp = tmp_path_factory.mktemp(f"straight-{workers}")
            proc = train_main([*TINY, f"infra.num_workers={workers}", *STRAIGHT, *overrides,
                               "log.run_name=straight"], tmp)
            assert proc.returncode == 0, proc.stderr
            made[key] = tmp / "straight"
        return made[key]

    return get
