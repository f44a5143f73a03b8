"""Atari through ale-py (fastrl.envs.atari): the preprocessed observation, the settings that
shape it, and the error that names the extra when ale-py is missing."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from gymnasium import spaces

from fastrl.config import load_config
from fastrl.envs.errors import EnvError
from fastrl.envs.source import env_source


def test_a_game_is_stacked_84x84_uint8_frames_channels_first():
    source = env_source(load_config(None, ["env.id=ALE/Pong-v5"]).env)
    envs = source.make([1, 2])
    try:
        assert envs.observation_space == spaces.Box(0, 255, (4, 84, 84), np.uint8)
        assert envs.action_space == spaces.Discrete(6)
        obs = envs.reset()
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        for _ in range(5):
            obs, reward, terminated, truncated, _ = envs.step(np.array([0, 1]))
        assert obs.shape == (2, 4, 84, 84) and reward.shape == (2,)
        assert 20 < obs[:, -1].mean() < 200  # a real screen, not an empty frame
    finally:
        envs.close()


def test_settings_shape_the_frames_and_reach_the_emulator():
    cfg = load_config(None, ["env.id=ALE/Breakout-v5", "env.atari.frame_stack=2",
                             "env.atari.screen_size=64", "env.atari.sticky_actions=0",
                             "env.atari.terminal_on_life_loss=true"])
    env = env_source(cfg.env).make_one()
    try:
        assert env.observation_space.shape == (2, 64, 64)
        assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0
        assert env.get_wrapper_attr("terminal_on_life_loss")
    finally:
        env.close()


def test_a_missing_ale_py_names_the_atari_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ale_py", None)  # import ale_py raises ImportError
    with pytest.raises(EnvError, match=r"ALE/Pong-v5.*atari extra.*\.\[atari\]"):
        env_source(load_config(None, ["env.id=ALE/Pong-v5"]).env).make_one()


@pytest.mark.parametrize("fire_reset", [False, True])
def test_fire_reset_launches_the_ball_that_a_noop_policy_never_would(fire_reset):
    cfg = load_config(None, ["env.id=ALE/Breakout-v5", "env.atari.noop_max=0",
                             "env.atari.sticky_actions=0", f"env.atari.fire_reset={fire_reset}"])
    env = env_source(cfg.env).make_one()
    try:
        env.reset(seed=0)
        ale = env.unwrapped.ale
        lost = []
        for _ in range(1500):  # NOOP only: without FIRE the ball never leaves the paddle
            _, _, terminated, truncated, _ = env.step(0)
            lost.append(5 - ale.lives())
            if terminated or truncated:
                break
        # with FIRE pressed for it, the ball is relaunched after every lost life
        assert (max(lost) >= 2) if fire_reset else (max(lost) == 0)
    finally:
        env.close()


def test_a_game_s_time_limit_is_the_fewest_steps_its_frame_limit_allows():
    def limit(*settings: str) -> int | None:
        cfg = load_config(None, ["env.id=ALE/Breakout-v5", *settings])
        envs = env_source(cfg.env).make([1])
        envs.close()
        return envs.max_episode_steps

    # ALE truncates at 108,000 frames; a step takes at most 2 frame skips (a FIRE after a
    # lost life), a reset its no-ops and one frame skip
    assert limit() == (108_000 - 30 - 4) // 8 == 13_495
    assert limit("env.atari.frame_skip=2", "env.atari.noop_max=0") == (108_000 - 2) // 4
