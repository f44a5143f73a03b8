"""Train fastrl on a simulator with a dict observation, an action mask and a need for memory.

``Doors`` is a corridor that ends at ``doors`` doors. The first step shows which door is
the right one (the ``cue`` leaf, one-hot); after that the cue is blank. Along the corridor
only "walk" is legal; at its end only the doors are: the ``action_mask`` leaf says which
actions are legal now (PettingZoo's convention), so the policy never wastes a sample on an
illegal one. The right door earns 1, a wrong one 0, and ends the episode.

At the doors the observation no longer says which door is right: a feed-forward policy
can only guess (1/doors), and a policy that remembers the cue opens the right one every
time. ``algo.core=gru`` gives the built-in network a recurrent core: the workers keep each
env's state from step to step, and the learner replays each env's sequence from the state
it started with. Run it from the repository root::

    python examples/memory_doors.py          # or: python -m examples.memory_doors

and the same from the command line:
``python -m fastrl.train env.fn=examples.memory_doors:make_env env.id=Doors algo.core=gru``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import fastrl

WALK = 0  # the one legal action in the corridor; actions 1..doors open a door


class Doors(gym.Env):
    """Walk ``length`` steps, then open the door that the first step showed."""

    def __init__(self, doors: int = 3, length: int = 4) -> None:
        self.doors, self.length = doors, length
        self.observation_space = spaces.Dict({
            "cue": spaces.Box(0, 1, (doors,), np.float32),  # the right door, at step 0 only
            "position": spaces.Box(0, 1, (1,), np.float32),  # how far along the corridor
            "action_mask": spaces.Box(0, 1, (doors + 1,), np.int8),  # 1 where legal now
        })
        self.action_space = spaces.Discrete(doors + 1)
        self._door, self._step = 0, 0

    def _obs(self) -> dict[str, np.ndarray]:
        cue = np.zeros(self.doors, np.float32)
        if self._step == 0:
            cue[self._door] = 1.0
        at_doors = self._step == self.length
        mask = np.zeros(self.doors + 1, np.int8)
        mask[1:] = at_doors
        mask[WALK] = not at_doors
        return {"cue": cue, "position": np.array([self._step / self.length], np.float32),
                "action_mask": mask}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """A new corridor; its right door drawn from the env's own generator."""
        super().reset(seed=seed)
        self._door, self._step = int(self.np_random.integers(self.doors)), 0
        return self._obs(), {}

    def step(self, action: int):
        """Walk, or (at the end) open door ``action``: 1 for the right one."""
        if self._step < self.length:
            self._step += 1
            return self._obs(), 0.0, False, False, {}
        reward = float(action - 1 == self._door)
        return self._obs(), reward, True, False, {}


def make_env(**kwargs: Any) -> gym.Env:
    """The factory fastrl calls in every worker (``env.kwargs`` as keyword arguments)."""
    return Doors(**kwargs)


def config(*overrides: str) -> fastrl.MainConfig:
    """PPO with a GRU core that learns Doors in a few tens of thousands of steps;
    ``overrides`` (``key=value``) go on top, as on the command line."""
    return fastrl.load_config(None, [
        "env.id=Doors",             # a name for run directories and logs
        "algo.name=ppo",
        "algo.core=gru",            # the recurrent core: the policy remembers the cue
        "algo.core_size=32",
        "algo.hidden_sizes=[32]",
        "algo.lr=2e-3",
        "algo.total_steps=100000",
        "algo.target_return=0.95",  # stop once the right door opens 95% of the time
        "infra.num_workers=2",
        "infra.envs_per_worker=8",
        "infra.rollout_len=32",
        "log.eval_every_steps=4096",
        "log.eval_episodes=20",
        "log.console=false",
        *overrides,
    ])


def main() -> None:
    """Train Doors and print what the run produced."""
    result = fastrl.Trainer(config(), env_fn=make_env).fit()
    print(f"{result.global_step} steps in {result.wall_s:.0f} s; evaluation return "
          f"{result.eval['return_mean']:.2f} (a policy without memory gets about "
          f"{1 / Doors().doors:.2f}); run directory {result.run_dir}")


if __name__ == "__main__":  # worker processes re-import this file: train only when run
    main()
