"""The serial runtime (infra.runtime=serial): everything in the calling process, no shared
memory, on-policy and off-policy."""

from __future__ import annotations

import os

import pytest
from helpers import tiny_config as config

from fastrl import Callback, Trainer
from fastrl.memory.segments import leftover_segments

pytestmark = pytest.mark.timeout(300)


def test_serial_runtime_creates_no_shared_memory(tmp_path, no_shm_residue):
    seen = []

    class Watch(Callback):
        def on_update(self, step, metrics):
            mine = f"fastrl_{os.getpid()}_"  # (other runs on the machine may have theirs)
            seen.extend(n for n in leftover_segments() if n.startswith(mine))

    cfg = config(tmp_path, "infra.runtime=serial", "algo.total_steps=1024")
    result = Trainer(cfg, callbacks=[Watch()]).fit()
    assert result.global_step == 1024 and not seen
    assert set(result.timing) == {"serial"}
    assert result.timing["serial"]["rollout"] > 0 and result.timing["serial"]["train"] > 0


def test_serial_runtime_runs_off_policy(tmp_path, no_shm_residue):
    cfg = config(tmp_path, "infra.runtime=serial", "algo.name=dqn", "algo.total_steps=3000",
                 "algo.replay.learning_starts=500", "algo.target_return=null")
    result = Trainer(cfg).fit()
    assert result.global_step >= 3000
    assert result.metrics["policy_version"] > 0  # it trained

