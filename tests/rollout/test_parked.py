"""Parked worker states: a state pickled before fastrl's modules moved still loads."""

from __future__ import annotations

import pickle

from fastrl.envs.source import EnvGroup, env_seeds
from fastrl.resume import MOVED_MODULES, load_parked


def test_a_parked_state_naming_a_moved_module_loads(tmp_path):
    state = {"collector": {"envs": EnvGroup, "seeds": env_seeds}, "rng": None}
    blob = pickle.dumps(state, protocol=0)  # (text protocol: module names are plain lines)
    old = blob.replace(b"fastrl.envs.source", b"fastrl.rollout.envs")
    assert old != blob and MOVED_MODULES["fastrl.rollout.envs"] == "fastrl.envs.source"
    path = tmp_path / "worker-0.pkl"
    path.write_bytes(old)
    assert load_parked(str(path)) == state
    assert load_parked(None) is None
