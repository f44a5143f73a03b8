"""Worker-side actors (fastrl.models.actors): random actions stay in the space and do not
repeat after a table."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from fastrl.models.actors import RANDOM_TABLE, RandomActor


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

