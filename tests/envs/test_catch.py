"""The numba Catch (fastrl.envs.catch): frames, rules, seeding, and its env id."""

from __future__ import annotations

import numpy as np
import pytest

from fastrl.envs import BatchedCatch
from fastrl.envs.catch import CELL, COLS, ROWS
from fastrl.envs.source import EnvSource

STAY, LEFT, RIGHT = 1, 0, 2


def cells(frame: np.ndarray) -> set[tuple[int, int]]:
    """The lit board cells of one frame ``[1, 80, 40]``, checking each is a whole block."""
    board = frame[0].reshape(ROWS, CELL, COLS, CELL)
    lit = board.max(axis=(1, 3)) == 255
    assert (board.min(axis=(1, 3))[lit] == 255).all() and (board.max(axis=(1, 3))[~lit] == 0).all()
    return {(int(r), int(c)) for r, c in zip(*np.nonzero(lit))}


def test_frames_are_uint8_blocks_of_the_ball_and_the_paddle():
    env = BatchedCatch([3, 4])
    obs = env.reset()
    assert obs.shape == (2, 1, ROWS * CELL, COLS * CELL) and obs.dtype == np.uint8
    assert env.observation_space.contains(obs[0])
    for i in range(2):
        ball_col = int(env._ball[i, 1])
        assert cells(obs[i]) == {(0, ball_col), (ROWS - 1, COLS // 2)}
    obs, *_ = env.step(np.array([LEFT, RIGHT]))
    assert (ROWS - 1, COLS // 2 - 1) in cells(obs[0]) and (ROWS - 1, COLS // 2 + 1) in cells(obs[1])
    assert (1, int(env._ball[0, 1])) in cells(obs[0])


@pytest.mark.parametrize("follow, reward", [(True, 1.0), (False, -1.0)])
def test_the_episode_ends_after_nine_steps_with_the_catch_or_the_miss(follow, reward):
    env = BatchedCatch([7])
    env.reset()
    for t in range(ROWS - 1):
        ball, paddle = int(env._ball[0, 1]), int(env._paddle[0])
        toward = np.sign(ball - paddle) + 1
        away = LEFT if ball >= COLS // 2 else RIGHT
        _, rew, term, trunc, final = env.step(np.array([toward if follow else away]))
        last = t == ROWS - 2
        assert bool(term[0]) == last and not trunc[0]
        assert rew[0] == (reward if last else 0.0)
    assert (ROWS - 1, ball) in cells(final[0])  # the last frame: ball on the bottom row
    assert int(env._ball[0, 0]) == 0  # and a new episode has started


def test_seeds_repeat_and_random_play_scores_about_minus_0_6():
    a, b = BatchedCatch(list(range(64))), BatchedCatch(list(range(64)))
    assert np.array_equal(a.reset(), b.reset())
    rng = np.random.default_rng(0)
    total = ends = 0.0
    for _ in range(90):
        actions = rng.integers(0, 3, 64)
        obs_a, rew, term, *_ = a.step(actions)
        assert np.array_equal(obs_a, b.step(actions)[0])
        total, ends = total + rew.sum(), ends + term.sum()
    assert ends == 640 and -0.75 < total / ends < -0.45


def test_bad_actions_are_refused_and_the_id_is_built_in():
    env = EnvSource("fastrl/Catch-v0").make([0, 1])
    assert isinstance(env, BatchedCatch)
    with pytest.raises(ValueError, match=r"actions of shape \(2,\) in"):
        env.step(np.array([0, 3]))
