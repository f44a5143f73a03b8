"""Train fastrl on your own Gymnasium-API simulator.

The simulator below, ``GoalReach``, is written from scratch: a point on the square
[-1, 1]² has to walk to a goal. fastrl needs three things from it:

1. a ``gymnasium.Env`` subclass with an ``observation_space`` and an ``action_space``
   (Box, Discrete, MultiDiscrete or MultiBinary), whose ``reset(seed=...)`` seeds
   ``self.np_random`` and whose ``step`` returns ``(obs, reward, terminated, truncated,
   info)``: observations of the space's shape and dtype, a finite real reward, bool flags;
2. a factory, ``make_env(**kwargs)``, that fastrl calls in every worker process with
   ``config.env.kwargs``; it must be importable (a module-level function) because worker
   processes are started with ``spawn``;
3. a config: the usual ``MainConfig``, where ``env.id`` only names the env in run
   directories and logs.

Before any process starts fastrl makes two envs, resets both with the same seed and steps
one with random actions, checking everything above (``fastrl.envs.contract.check_env``).

Run it from the repository root::

    python examples/custom_env.py           # or: python -m examples.custom_env
    python -m fastrl.train env.fn=examples.custom_env:make_env env.id=GoalReach \\
        algo.target_return=1.6 algo.lr=1e-3  # the same run from the command line
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

import fastrl

# Actions move the point by STEP along one axis (or not at all).
MOVES = np.array([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]], np.float64)
STEP = 0.1
GOAL_RADIUS = 0.1  # the goal is reached within this distance
GOAL_BONUS = 1.0


class GoalReach(gym.Env):
    """A point and a goal drawn uniformly on [-1, 1]²; the point moves by ``STEP`` up, down,
    left or right (or stays) until it is within ``GOAL_RADIUS`` of the goal.

    Observation (float32): the point's position and the vector from it to the goal.
    Reward: the distance gained towards the goal in that step, plus ``GOAL_BONUS`` on
    reaching it, so that an episode's return is (start distance - end distance) plus the
    bonus when reached: about 2 for a direct walk, about 0 for a random one. The episode
    terminates at the goal and is truncated after ``max_steps`` (the longest direct walk
    takes 40 steps).
    """

    metadata: dict = {"render_modes": []}

    def __init__(self, max_steps: int = 50) -> None:
        self.max_steps = max_steps
        self.observation_space = gym.spaces.Box(
            np.array([-1, -1, -2, -2], np.float32), np.array([1, 1, 2, 2], np.float32))
        self.action_space = gym.spaces.Discrete(len(MOVES))
        self._pos = np.zeros(2)
        self._goal = np.zeros(2)
        self._t = 0

    def _obs(self) -> np.ndarray:
        return np.concatenate([self._pos, self._goal - self._pos]).astype(np.float32)

    def _distance(self) -> float:
        return float(np.linalg.norm(self._goal - self._pos))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Draw a new point and goal from ``self.np_random`` (seeded by ``seed``)."""
        super().reset(seed=seed)
        self._pos = self.np_random.uniform(-1, 1, 2)
        self._goal = self.np_random.uniform(-1, 1, 2)
        self._t = 0
        return self._obs(), {}

    def step(self, action: int):
        """Move, then reward the distance gained; terminate at the goal."""
        before = self._distance()
        self._pos = np.clip(self._pos + STEP * MOVES[int(action)], -1, 1)
        self._t += 1
        after = self._distance()
        reached = after <= GOAL_RADIUS
        reward = before - after + (GOAL_BONUS if reached else 0.0)
        return self._obs(), reward, reached, self._t >= self.max_steps, {"distance": after}


def make_env(**kwargs: Any) -> GoalReach:
    """The factory fastrl calls in each worker: ``make_env(**config.env.kwargs)``."""
    return GoalReach(**kwargs)


def config(*overrides: str) -> fastrl.MainConfig:
    """PPO settings that learn GoalReach in a few tens of thousands of steps; ``overrides``
    (``key=value``) go on top, as on the command line."""
    return fastrl.load_config(None, [
        "env.id=GoalReach",         # a name for run directories and logs
        "algo.name=ppo",
        "algo.lr=1e-3",
        "algo.total_steps=100000",
        "algo.target_return=1.6",   # stop once the evaluation averages this
        "infra.num_workers=2",
        "infra.envs_per_worker=4",
        "infra.rollout_len=64",
        "log.eval_every_steps=4096",
        "log.console=false",
        *overrides,
    ])


def main() -> None:
    """Train GoalReach and print what the run produced."""
    result = fastrl.Trainer(config(), env_fn=make_env).fit()
    print(f"{result.global_step} steps in {result.wall_s:.0f} s; evaluation return "
          f"{result.eval['return_mean']:.2f} (a random walk gets about 0); "
          f"run directory {result.run_dir}")


if __name__ == "__main__":  # worker processes re-import this file: train only when run
    main()
