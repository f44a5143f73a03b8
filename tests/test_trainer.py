"""The Trainer (fastrl.trainer) before a run: what it refuses before anything starts."""

from __future__ import annotations

import gymnasium as gym
import pytest
from helpers import tiny_config as config

from fastrl import Trainer
from fastrl.config import ConfigError


def test_unpicklable_env_factory_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(ConfigError, match="env_fn=.*cannot be sent to worker processes"):
        Trainer(config(tmp_path), env_fn=lambda: gym.make("CartPole-v1"))
    assert not list(tmp_path.iterdir())

