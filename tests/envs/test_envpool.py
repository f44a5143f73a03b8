"""EnvPool as an env backend (fastrl.envs.envpool): the spaces it presents match the
Gymnasium backend's, an ended episode is reset within its step as fastrl's slots need, and
ids or factories it cannot step are refused in one line. (Gymnasium's MuJoCo envs start a
process on import: the MuJoCo comparison and training runs are in
tests/e2e/test_envpool_backend.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from fastrl.config import load_config
from fastrl.envs.batched import own_rows
from fastrl.envs.errors import EnvError
from fastrl.envs.source import env_source


def source(*overrides: str):
    return env_source(load_config(None, list(overrides)).env)


@pytest.mark.parametrize("game", ["ALE/Pong-v5", "ALE/Breakout-v5"])
def test_atari_spaces_match_the_gymnasium_backend(game):
    settings = ["env.atari.frame_stack=3", "env.atari.screen_size=64"]
    pool = source(f"env.id={game}", "env.backend=envpool", *settings).make([7, 8])
    gym_env = source(f"env.id={game}", *settings).make_one()
    try:
        assert pool.observation_space == gym_env.observation_space == \
            spaces.Box(0, 255, (3, 64, 64), np.uint8)
        assert pool.action_space == gym_env.action_space
        obs = pool.reset()
        assert obs.shape == (2, 3, 64, 64) and obs.dtype == np.uint8
    finally:
        pool.close()
        gym_env.close()


def test_an_ended_episode_is_reset_within_its_step():
    pool = source("env.id=Hopper-v5", "env.backend=envpool").make([3, 4, 5])
    rows = own_rows(3, (11,), np.dtype(np.float64))
    try:
        pool.reset()
        for _ in range(400):  # a Hopper that does nothing falls within ~150 steps
            pool.step_into(np.zeros((3, 3), np.float32), rows)
            if rows.terminated.any():
                break
        ended = np.flatnonzero(rows.terminated)
        assert len(ended), "no episode ended"
        # the last observation is the falling hopper's (height below 0.7 or torso tilted
        # past 0.2 rad: Hopper's episode end), the next one a fresh upright start
        final, first = rows.final_obs[ended], rows.obs[ended]
        assert ((final[:, 0] < 0.7) | (np.abs(final[:, 1]) > 0.2)).all()
        assert np.allclose(first[:, 0], 1.25, atol=0.01) and (np.abs(first[:, 1]) < 0.01).all()
        # and the step after is a real one (EnvPool's own reset would ignore the action and
        # give reward 0): a standing hopper earns its healthy reward of about 1
        pool.step_into(np.zeros((3, 3), np.float32), rows)
        assert (rows.reward[ended] > 0.5).all() and not rows.terminated[ended].any()
    finally:
        pool.close()


def test_mujoco_actions_are_float32_like_gymnasium_s():
    pool = source("env.id=HalfCheetah-v5", "env.backend=envpool").make([1])
    try:
        assert pool.action_space == spaces.Box(-1, 1, (6,), np.float32)
        assert pool.observation_space.shape == (17,)
    finally:
        pool.close()


@pytest.mark.parametrize("overrides, says", [
    (["env.id=ALE/NoSuchGame-v5"], "EnvPool has no env 'ALE/NoSuchGame-v5'"),
    (["env.id=Swimmer-v9"], "EnvPool has no env 'Swimmer-v9'"),
    (["env.id=fastrl/CartPole-v1"], "takes env.backend=gymnasium"),
    (["env.fn=fastrl.envs.cartpole:BatchedCartPole"], "takes env.backend=gymnasium"),
])
def test_what_envpool_cannot_step_is_refused_in_one_line(overrides, says):
    with pytest.raises(EnvError) as e:
        source("env.backend=envpool", *overrides)
    assert says in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("env_id, limit", [("ALE/Pong-v5", 27_000), ("Hopper-v5", 1_000)])
def test_a_pool_declares_envpool_s_own_time_limit(env_id, limit):
    pool = source(f"env.id={env_id}", "env.backend=envpool").make([1, 2])
    pool.close()
    assert pool.max_episode_steps == limit


def test_an_envpool_dict_observation_space_is_refused_in_one_line():
    with pytest.raises(EnvError, match=r"observes a Dict space: use env.backend=gymnasium"):
        source("env.id=CheetahRun-v1", "env.backend=envpool").make([0])
