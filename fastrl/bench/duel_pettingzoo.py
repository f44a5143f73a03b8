"""Duel (fastrl.envs.duel) under PettingZoo's Parallel API, one game an env: the same game
as a PettingZoo user would write it, for the bench's multi-agent peer (SuperSuit's
vectorisation into an SB3 VecEnv, fastrl.bench.peers.supersuit). Each step runs Duel's own
numba kernel on its one game, so the two differ only in the API around it."""

from __future__ import annotations

import numpy as np
from pettingzoo import ParallelEnv

from fastrl.envs.batched import own_rows
from fastrl.envs.duel import AGENTS, OBS_SIZE, BatchedDuel


class DuelParallelEnv(ParallelEnv):
    """One Duel game; after the step that ends it, ``agents`` is empty until ``reset()``,
    which continues with the next game of the seed's stream (a seed restarts it)."""

    metadata = {"name": "duel_v0", "render_modes": []}
    possible_agents = list(AGENTS)
    render_mode = None

    def __init__(self, seed: int = 0, cells: int = 9, steps: int = 80) -> None:
        self._game = BatchedDuel([seed], cells, steps)
        self._rows = own_rows(2, (OBS_SIZE,), np.dtype(np.float32))
        self._obs = self._game.reset()
        self.agents: list[str] = []

    def observation_space(self, agent: str):
        return self._game.observation_space

    def action_space(self, agent: str):
        return self._game.action_space

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._game.seeds = [seed]
            self._obs = self._game.reset()
        self.agents = list(AGENTS)
        return {a: self._obs[i].copy() for i, a in enumerate(AGENTS)}, {a: {} for a in AGENTS}

    def step(self, actions: dict):
        rows = self._rows
        self._game.step_into(np.array([actions[a] for a in AGENTS]), rows)
        over = bool(rows.terminated[0])
        shown = rows.final_obs if over else rows.obs
        self._obs = rows.obs.copy()
        self.agents = [] if over else list(AGENTS)
        return ({a: shown[i].copy() for i, a in enumerate(AGENTS)},
                {a: float(rows.reward[i]) for i, a in enumerate(AGENTS)},
                {a: over for a in AGENTS}, {a: False for a in AGENTS},
                {a: {} for a in AGENTS})


def parallel_env(**kwargs) -> DuelParallelEnv:
    """PettingZoo's factory convention (fastrl.envs.multiagent.pettingzoo_factory)."""
    return DuelParallelEnv(**kwargs)
