"""Duel: a two-player zero-sum race for coins, a numba-compiled batched multi-agent
simulator (``fastrl/Duel-v0``), the built-in game of self-play (docs/multi-agent.md).

Two players on a line of ``cells`` cells chase one coin. Each step both move at once (0
left, 1 stay, 2 right); a player that lands on the coin alone takes it (+1, the other -1),
two that land together split nothing, and either way the coin moves to a random free
cell. A game lasts ``steps`` steps and ends (terminated) there: a player's return is its
coins less its opponent's, so > 0 is a win. Each player sees, as float32 ``[7]``, from its
own side: its cell, its opponent's, the coin's (each over ``cells``), the coin's offset
from it and from its opponent, the share of the game left, and its lead (clipped to
±10, over 10).

Rows: env ``i``'s ``player_0`` is row ``2i``, ``player_1`` row ``2i + 1``
(fastrl.envs.multiagent); both are live throughout. :class:`HesitantGreedy` is the
scripted baseline self-play is judged against.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from numba import njit

from fastrl.envs.batched import StepRows, WritesRows, checked_discrete_actions, own_rows
from fastrl.envs.rng import uniform

AGENTS = ("player_0", "player_1")
OBS_SIZE = 7
LEFT, STAY, RIGHT = range(3)


@njit(cache=True, nogil=True)
def _random_cell(rng, i: int, cells: int) -> int:
    return min(int(uniform(rng, i) * cells), cells - 1)


@njit(cache=True, nogil=True)
def _place_coin(pos, coin, rng, i: int, cells: int) -> None:
    c = _random_cell(rng, i, cells)
    while c == pos[i, 0] or c == pos[i, 1]:
        c = _random_cell(rng, i, cells)
    coin[i] = c


@njit(cache=True, nogil=True)
def _new_game(pos, coin, lead, t, rng, i: int, cells: int) -> None:
    pos[i, 0] = _random_cell(rng, i, cells)
    pos[i, 1] = _random_cell(rng, i, cells)
    while pos[i, 1] == pos[i, 0]:
        pos[i, 1] = _random_cell(rng, i, cells)
    _place_coin(pos, coin, rng, i, cells)
    lead[i] = 0
    t[i] = 0


@njit(cache=True, nogil=True)
def _observe(pos, coin, lead, t, obs, i: int, cells: int, steps: int) -> None:
    for k in range(2):
        me, other = pos[i, k], pos[i, 1 - k]
        row = obs[2 * i + k]
        row[0] = me / cells
        row[1] = other / cells
        row[2] = coin[i] / cells
        row[3] = (coin[i] - me) / cells
        row[4] = (coin[i] - other) / cells
        row[5] = (steps - t[i]) / steps
        mine = lead[i] if k == 0 else -lead[i]
        row[6] = min(max(mine, -10), 10) / 10.0


@njit(cache=True, nogil=True)
def _reset_all(pos, coin, lead, t, rng, obs, cells: int, steps: int) -> None:
    for i in range(coin.shape[0]):
        _new_game(pos, coin, lead, t, rng, i, cells)
        _observe(pos, coin, lead, t, obs, i, cells, steps)


@njit(cache=True, nogil=True)
def _step(pos, coin, lead, t, rng, actions, obs, reward, terminated, final, cells: int,
          steps: int) -> None:
    for i in range(coin.shape[0]):
        for k in range(2):
            pos[i, k] = min(max(pos[i, k] + actions[2 * i + k] - 1, 0), cells - 1)
        on0, on1 = pos[i, 0] == coin[i], pos[i, 1] == coin[i]
        r = 1.0 if on0 and not on1 else (-1.0 if on1 and not on0 else 0.0)
        reward[2 * i], reward[2 * i + 1] = r, -r
        lead[i] += int(r)
        if on0 or on1:
            _place_coin(pos, coin, rng, i, cells)
        t[i] += 1
        over = t[i] == steps
        terminated[2 * i] = terminated[2 * i + 1] = over
        if over:
            _observe(pos, coin, lead, t, final, i, cells, steps)
            _new_game(pos, coin, lead, t, rng, i, cells)
        _observe(pos, coin, lead, t, obs, i, cells, steps)


class HesitantGreedy:
    """The scripted Duel baseline: heads for the coin, but stays put a quarter of the
    time (drawn from its own generator, seeded)."""

    def __init__(self, seed: int = 0, hesitate: float = 0.25) -> None:
        self.rng, self.hesitate = np.random.default_rng(seed), hesitate

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Actions for Duel observations ``[n, 7]``."""
        toward = np.sign(obs[:, 3]).astype(np.int64) + STAY
        return np.where(self.rng.random(len(obs)) < self.hesitate, STAY, toward)


class BatchedDuel(WritesRows):
    """``len(seeds)`` Duel games in one numba kernel, two rows each (a multi-agent
    :class:`~fastrl.envs.batched.BatchedEnv`: ``agents``, rows ``2 * len(seeds)``)."""

    agents = AGENTS
    baseline = HesitantGreedy  # the scripted opponent evaluations play (selfplay.baseline)

    def __init__(self, seeds: list[int], cells: int = 9, steps: int = 80) -> None:
        if cells < 3 or steps < 1:
            raise ValueError(f"Duel takes cells >= 3 and steps >= 1, got cells={cells}, "
                             f"steps={steps}")
        self.cells, self.steps = int(cells), int(steps)
        self.observation_space = spaces.Box(-1.0, 1.0, (OBS_SIZE,), np.float32)
        self.action_space = spaces.Discrete(3)
        self.seeds = list(seeds)
        n = len(seeds)
        self.num_envs = 2 * n
        self.max_episode_steps = self.steps  # (games end terminated; none is truncated)
        self._pos = np.zeros((n, 2), np.int64)
        self._coin = np.zeros(n, np.int64)
        self._lead = np.zeros(n, np.int64)
        self._t = np.zeros(n, np.int64)
        self._rng = np.array(seeds, np.uint64)
        self._rows = own_rows(2 * n, (OBS_SIZE,), np.dtype(np.float32))

    def reset(self) -> np.ndarray:
        """Start every game from its seed; returns the first observations ``[2n, 7]``."""
        self._rng[:] = np.array(self.seeds, np.uint64)
        _reset_all(self._pos, self._coin, self._lead, self._t, self._rng, self._rows.obs,
                   self.cells, self.steps)
        return self._rows.obs

    def step_into(self, actions: np.ndarray, out: StepRows) -> None:
        """Both players of every game move at once; ended games restart in the same call."""
        actions = checked_discrete_actions(actions, (self.num_envs,), 3, "BatchedDuel")
        out.truncated[...] = False
        _step(self._pos, self._coin, self._lead, self._t, self._rng, actions.astype(np.int64),
              out.obs, out.reward, out.terminated, out.final_obs, self.cells, self.steps)

    def close(self) -> None:
        """Nothing to free."""
