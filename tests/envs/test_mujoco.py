"""Gymnasium's MuJoCo envs (fastrl.envs.mujoco): they are recognised by id, and a missing
extra is one line naming it. (The shipped configs, and MuJoCo's warnings shown once per
process: tests/cli/test_mujoco_configs.py; gymnasium's MuJoCo renderer starts a process on
import, which unit tests may not.)"""

from __future__ import annotations

import sys

import pytest

from fastrl.config import load_config
from fastrl.envs import mujoco as fastrl_mujoco
from fastrl.envs.errors import EnvError
from fastrl.envs.source import env_source


def test_locomotion_ids_are_mujoco_and_others_are_not():
    assert all(fastrl_mujoco.is_mujoco(f"{name}-v5") for name in
               ("Hopper", "Walker2d", "HalfCheetah", "Ant", "Humanoid"))
    assert not fastrl_mujoco.is_mujoco("CartPole-v1")
    assert not fastrl_mujoco.is_mujoco("ALE/Pong-v5")
    assert not fastrl_mujoco.is_mujoco("NoSuchEnv-v0")


def test_a_missing_mujoco_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)  # import mujoco raises ImportError
    with pytest.raises(EnvError) as e:
        env_source(load_config(None, ["env.id=Hopper-v5"]).env).make_one()
    message = str(e.value)
    assert "\n" not in message and "'.[mujoco]'" in message and "Hopper-v5" in message
