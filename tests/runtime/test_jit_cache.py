"""JIT start-up (fastrl.core.jit): fastrl's numba kernels are compiled once and loaded from
numba's on-disk cache afterwards, also from a package installed where it cannot write, and
the stage table reports each process's seconds compiling."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import TINY, tiny_config

import fastrl
from fastrl.core.timing import JIT
from fastrl.trainer import Trainer

PACKAGE = Path(fastrl.__file__).parent
PROBE = ("from fastrl.rollout.collector import finish_slot, warm_up; warm_up(); "
         "s = finish_slot.stats; "
         "print(sum(s.cache_hits.values()), sum(s.cache_misses.values()), s.cache_path)")


def test_a_read_only_install_caches_its_kernels_in_the_user_s_cache(tmp_path):
    """A copy of the package whose ``__pycache__`` folders cannot be made (a file stands in
    each one's place: not writable even for root): the first process compiles a kernel and
    keeps it under ``~/.cache/numba``, the second loads it from there."""
    site, home = tmp_path / "site", tmp_path / "home"
    shutil.copytree(PACKAGE, site / "fastrl", ignore=shutil.ignore_patterns("__pycache__"))
    for folder in (site / "fastrl").rglob("*"):
        if folder.is_dir():
            (folder / "__pycache__").write_text("")
    (site / "fastrl" / "__pycache__").write_text("")
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(site),
           "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("XDG_CACHE_HOME", None)
    runs = [subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                           env=env, timeout=300, cwd=tmp_path) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    (hits1, misses1, path1), (hits2, misses2, path2) = (r.stdout.split() for r in runs)
    # (warm_up loads one kernel per slot kind: weighted rows, and every row live)
    assert (hits1, misses1) == ("0", "2") and (hits2, misses2) == ("2", "0")
    assert path1 == path2 and Path(path1).is_relative_to(home / ".cache" / "numba")


def test_a_second_run_compiles_nothing_and_the_table_says_so(tmp_path, no_shm_residue):
    """Two DQN runs: whatever the first compiled (nothing, once the checkout has run
    fastrl before), the second loads from numba's cache; the learner's and the workers'
    seconds compiling are in the run's timing, next to their stages."""
    dqn = [*TINY, "algo.name=dqn", "algo.replay.learning_starts=64", "algo.total_steps=512",
           "algo.target_return=null"]
    timings = [Trainer(tiny_config(tmp_path / str(i), *dqn)).fit().timing for i in range(2)]
    for timing in timings:
        assert JIT in timing["learner"] and JIT in timing["worker 0"]
    second = timings[1]
    assert second["learner"][JIT] < 0.05 and second["worker 0"][JIT] < 0.05, second
