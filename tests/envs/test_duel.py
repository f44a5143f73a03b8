"""Duel (fastrl.envs.duel): the two-player race for coins self-play learns, its rules,
seeding, egocentric observations, and the scripted baseline."""

from __future__ import annotations

import numpy as np

from fastrl.envs.batched import own_rows
from fastrl.envs.contract import check_env
from fastrl.envs.duel import LEFT, RIGHT, STAY, BatchedDuel, HesitantGreedy
from fastrl.envs.source import EnvSource


def put(duel: BatchedDuel, p0: int, p1: int, coin: int) -> None:
    """Place the players and the coin of game 0 by hand."""
    duel._pos[0] = p0, p1
    duel._coin[0] = coin


def one_game(cells: int, steps: int) -> tuple[BatchedDuel, object]:
    """A reset game of seed 0 and rows for its two players' steps."""
    duel = BatchedDuel([0], cells=cells, steps=steps)
    duel.reset()
    return duel, own_rows(2, (7,), np.float32)


def test_a_player_that_lands_on_the_coin_alone_takes_it_from_the_other():
    duel, rows = one_game(cells=9, steps=10)
    put(duel, 3, 6, 4)
    duel.step_into(np.array([RIGHT, LEFT]), rows)
    assert rows.reward.tolist() == [1.0, -1.0]
    assert duel._coin[0] not in duel._pos[0]  # the coin moved to a free cell
    put(duel, 3, 5, 4)  # both land on it: nobody takes it
    duel.step_into(np.array([RIGHT, LEFT]), rows)
    assert rows.reward.tolist() == [0.0, 0.0]
    # the lead: +1 for player 0, seen as -1 (over 10) by player 1
    assert rows.obs[0, 6] == 0.1 and rows.obs[1, 6] == -0.1


def test_observations_are_each_player_s_own_view():
    duel, rows = one_game(cells=10, steps=20)
    put(duel, 1, 7, 4)
    duel.step_into(np.array([STAY, STAY]), rows)
    np.testing.assert_allclose(rows.obs[0], [0.1, 0.7, 0.4, 0.3, -0.3, 19 / 20, 0])
    np.testing.assert_allclose(rows.obs[1], [0.7, 0.1, 0.4, -0.3, 0.3, 19 / 20, 0])


def test_a_game_ends_terminated_for_both_players_and_a_new_one_starts():
    duel = BatchedDuel([3, 4], steps=5)
    first = duel.reset().copy()
    rows = own_rows(4, (7,), np.float32)
    for t in range(5):
        duel.step_into(np.full(4, STAY), rows)
        assert rows.terminated.all() == (t == 4) and not rows.truncated.any()
    assert rows.final_obs[:, 5].tolist() == [0.0] * 4  # nothing of the game left
    assert rows.obs[:, 5].tolist() == [1.0] * 4 and (rows.obs[:, 6] == 0).all()
    np.testing.assert_array_equal(BatchedDuel([3, 4], steps=5).reset(), first)


def test_the_contract_check_passes_and_rows_are_two_a_game():
    check_env(EnvSource("fastrl/Duel-v0"), seed=0)
    duel = EnvSource("fastrl/Duel-v0").make([0, 1, 2])
    assert duel.num_envs == 6 and duel.agents == ("player_0", "player_1")


def test_the_baseline_heads_for_the_coin_and_hesitates_a_quarter_of_the_time():
    obs = np.zeros((4000, 7), np.float32)
    obs[:2000, 3], obs[2000:, 3] = 0.3, -0.3
    actions = HesitantGreedy(seed=0)(obs)
    assert set(actions[:2000]) == {RIGHT, STAY} and set(actions[2000:]) == {LEFT, STAY}
    assert abs((actions == STAY).mean() - 0.25) < 0.03
