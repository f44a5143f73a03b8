"""The numba CartPole reproduces gymnasium's CartPole-v1 step for step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from fastrl.envs import BatchedCartPole
from fastrl.envs.source import EnvSource


def test_spaces_equal_gymnasium():
    ref = gym.make("CartPole-v1")
    env = BatchedCartPole([0])
    assert env.observation_space == ref.observation_space
    assert env.action_space == ref.action_space


@pytest.mark.parametrize("seed", range(5))
def test_same_states_rewards_terminations_from_the_same_start(seed):
    rng = np.random.default_rng(seed)
    ref = gym.make("CartPole-v1")
    ref.reset(seed=seed)
    env = BatchedCartPole([seed])
    env.reset()
    start = rng.uniform(-0.05, 0.05, 4)
    ref.unwrapped.state = start.copy()
    env.state[0] = start
    for t in range(600):
        action = int(rng.integers(2))
        obs_ref, r_ref, term_ref, trunc_ref, _ = ref.step(action)
        obs, r, term, trunc, final = env.step(np.array([action]))
        got = final[0] if (term[0] or trunc[0]) else obs[0]
        np.testing.assert_allclose(got, obs_ref, atol=1e-5, err_msg=f"step {t}")
        assert (r[0], term[0], trunc[0]) == (r_ref, term_ref, trunc_ref), f"step {t}"
        if term_ref or trunc_ref:
            # gymnasium resets here; continue both from the same new start state
            ref.reset()
            start = rng.uniform(-0.05, 0.05, 4)
            ref.unwrapped.state = start.copy()
            env.state[0] = start
            env._steps[0] = 0


def test_truncates_at_500_steps_and_resets_in_the_same_call():
    env = BatchedCartPole([0, 1], max_episode_steps=500)
    env.reset()
    ends = []
    for t in range(1000):
        env.state[:] = 0.0  # keep the pole upright: only the time limit can end it
        _, _, term, trunc, _ = env.step(np.array([t % 2, (t + 1) % 2]))
        assert not term.any()
        if trunc.any():
            ends.append(t)
    assert ends == [499, 999]


def test_seeded_resets_are_reproducible_and_differ_per_env():
    a, b = BatchedCartPole([7, 8]).reset().copy(), BatchedCartPole([7, 8]).reset().copy()
    assert np.array_equal(a, b) and not np.array_equal(a[0], a[1])
    assert (np.abs(a) < 0.05).all()


def test_env_id_selects_the_batched_simulator():
    assert isinstance(EnvSource("fastrl/CartPole-v1").make([0, 1]), BatchedCartPole)
