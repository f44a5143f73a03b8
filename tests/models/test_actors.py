"""Worker-side actors (fastrl.models.actors): random actions stay in the space and do not
repeat after a table; an actor restored from a parked worker's state acts on as the one that
saved it would have."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from helpers import assert_restores

from fastrl.algos.dqn import EpsilonGreedy
from fastrl.models.actors import RANDOM_TABLE, RandomActor
from fastrl.models.qnet import QNetwork


def test_random_actions_stay_in_the_space_and_do_not_repeat_after_a_table():
    space = spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
    act = RandomActor(space, 3, seed=5)
    actions = np.stack([act(None)[0] for _ in range(2 * RANDOM_TABLE + 7)])
    assert actions.shape == (2 * RANDOM_TABLE + 7, 3, 2)
    assert all(space.contains(a) for a in actions.reshape(-1, 2)[::97])
    assert not np.array_equal(actions[:RANDOM_TABLE], actions[RANDOM_TABLE:2 * RANDOM_TABLE])
    discrete = RandomActor(spaces.Discrete(3, start=-1), 4, seed=5)
    counts = np.bincount(np.concatenate([discrete(None)[0] for _ in range(3000)]) + 1)
    assert counts.min() > 3500  # ~4000 each of -1, 0, 1



def test_an_actor_restored_from_its_state_draws_what_the_saved_one_would_have():
    # (LegalRandomActor: tests/models/test_masks.py)
    space = spaces.Discrete(3)
    q = QNetwork(spaces.Box(-1, 1, (2,)), space, [8])
    obs = np.zeros((4, 2), np.float32)
    for make in (lambda s: RandomActor(space, 4, s), lambda s: EpsilonGreedy(q, space, s)):
        assert_restores(make, obs, RANDOM_TABLE + 5)  # (past a random table's end)

