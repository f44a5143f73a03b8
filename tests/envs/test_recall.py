"""The numba Recall memory task (fastrl.envs.recall): what each step shows, the reward, the
episode, seeding, and that nothing but memory can name the cue at the query."""

from __future__ import annotations

import numpy as np
import pytest

from fastrl.envs import BatchedRecall
from fastrl.envs.source import EnvSource


def test_the_cue_is_shown_once_and_only_its_name_at_the_query_earns():
    env = BatchedRecall(list(range(16)), cues=4, delay=3)
    obs = env.reset().copy()
    cue = obs[:, :4].argmax(1)
    assert obs.shape == (16, 5) and (obs.sum(1) == 1).all() and (obs[:, 4] == 0).all()
    wrong = (cue + 1) % 4
    for t in range(1, 5):  # 3 blank steps, then the query
        obs, reward, terminated, truncated, final = env.step(wrong)
        assert not truncated.any()
        if t <= 3:
            assert (obs == 0).all() and (reward == 0).all() and not terminated.any()
    assert (obs[:, 4] == 1).all() and (obs[:, :4] == 0).all()  # the query: no cue in it
    half = np.arange(16) % 2 == 0
    _, reward, terminated, _, final = env.step(np.where(half, cue, wrong))
    assert terminated.all() and (final == 0).all()
    np.testing.assert_array_equal(reward, half.astype(np.float32))
    assert env.max_episode_steps == 5


def test_a_memoryless_policy_scores_one_over_the_cues():
    # the query shows the same for every cue: the best guess from it alone is right 1 in 4
    env = BatchedRecall(list(range(4000)), cues=4, delay=2)
    env.reset()
    for _ in range(3):
        obs, *_ = env.step(np.zeros(4000, np.int64))
    assert len(np.unique(obs, axis=0)) == 1  # every env's query looks alike
    reward = env.step(np.zeros(4000, np.int64))[1]
    assert reward.mean() == pytest.approx(0.25, abs=0.03)


def test_seeds_repeat_and_the_id_makes_it_with_its_kwargs():
    a = EnvSource("fastrl/Recall-v0", {"cues": 3, "delay": 1}).make([5, 6])
    b = BatchedRecall([5, 6], cues=3, delay=1)
    assert isinstance(a, BatchedRecall) and a.action_space.n == 3
    np.testing.assert_array_equal(a.reset(), b.reset())
    with pytest.raises(ValueError, match="cues >= 2"):
        BatchedRecall([0], cues=1)
