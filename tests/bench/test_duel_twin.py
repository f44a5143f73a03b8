"""The bench's multi-agent peer steps the same Duel as fastrl: its PettingZoo twin
(fastrl.bench.duel_pettingzoo) gives the batched game's observations and rewards for the
same actions, across game ends, and SuperSuit vectorises it."""

from __future__ import annotations

import numpy as np

from fastrl.bench import peers
from fastrl.bench.duel_pettingzoo import parallel_env
from fastrl.envs.batched import own_rows
from fastrl.envs.duel import AGENTS, BatchedDuel


def test_the_pettingzoo_twin_plays_the_batched_game():
    twin, duel = parallel_env(seed=5, steps=10), BatchedDuel([5], steps=10)
    first, _ = twin.reset()
    np.testing.assert_array_equal(np.stack([first[a] for a in AGENTS]), duel.reset())
    rows = own_rows(2, (7,), np.float32)
    rng = np.random.default_rng(0)
    for _ in range(35):
        actions = rng.integers(3, size=2)
        obs, reward, term, _, _ = twin.step(dict(zip(AGENTS, actions)))
        duel.step_into(actions, rows)
        shown = rows.final_obs if rows.terminated[0] else rows.obs
        np.testing.assert_array_equal(np.stack([obs[a] for a in AGENTS]), shown)
        assert [reward[a] for a in AGENTS] == rows.reward.tolist()
        assert term["player_0"] == rows.terminated[0] == (not twin.agents)
        if not twin.agents:
            again, _ = twin.reset()
            np.testing.assert_array_equal(np.stack([again[a] for a in AGENTS]), rows.obs)


def test_supersuit_steps_the_twin_as_agent_rows():
    result = peers.supersuit("fastrl.bench.duel_pettingzoo", {}, 8, 1, warmup_s=0.1,
                             duration_s=0.3)
    assert result.system == "SuperSuit + SB3 VecEnv" and result.envs == 8
    assert result.steps > 0 and result.steps % 8 == 0
