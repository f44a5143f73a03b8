"""HeavyCartPole (fastrl.envs.heavy): CartPole-v1 plus a fixed amount of work per step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from fastrl.envs.heavy import spin_iters_for


def test_heavy_cartpole_is_cartpole_plus_fixed_work():
    iters = spin_iters_for(50)
    heavy, plain = gym.make("fastrl/HeavyCartPole-v1", spin_iters=iters), gym.make("CartPole-v1")
    o1, _ = heavy.reset(seed=3)
    o2, _ = plain.reset(seed=3)
    for a in [0, 1, 1, 0, 1]:
        assert np.array_equal(o1, o2)
        o1, o2 = heavy.step(a)[0], plain.step(a)[0]
    assert iters > 100 and heavy.spec.max_episode_steps == 500

