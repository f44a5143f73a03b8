"""Train fastrl on your own natively batched simulator.

A batched simulator steps all of a worker's envs in one call, arrays in and arrays out,
which is how simulators written in numpy, numba, JAX or C++ are fastest: no Python loop
over envs and no per-env objects. fastrl takes any object with the
:class:`fastrl.envs.BatchedEnv` interface:

- ``observation_space`` / ``action_space``: the spaces of *one* env; ``num_envs``;
- ``reset() -> obs[n, *obs_shape]``: every env reset from its own seed;
- ``step_into(actions[n, ...], out)``: one step of every env, written into ``out``
  (``fastrl.envs.batched.StepRows``: ``obs``, ``reward``, ``terminated``, ``truncated``,
  ``final_obs``), which are views of the shared-memory slot the worker is filling, already
  of the right shapes and dtypes: nothing is copied between the simulator and the ring.
  They hold stale bytes of earlier slots: write every field, and keep no reference to them.
  An env whose episode ends in this step is reset *in this same step*: ``out.obs[i]`` is
  then the first observation of its next episode and ``out.final_obs[i]`` the real last
  observation of the one that ended (fastrl bootstraps truncated episodes from it);
  ``final_obs`` rows of the other envs are not read. (A simulator may instead implement
  ``step(actions) -> (obs, reward, terminated, truncated, final_obs)`` with arrays of its
  own, which fastrl copies into the slot.)
- ``close()``.

It comes from a factory ``make_sim(seeds, **kwargs)`` that fastrl calls in every worker
with that worker's env seeds and ``config.env.kwargs``. fastrl checks what the simulator
returns against its spaces (every ``step`` result; rewards of ``step_into`` once per slot),
and before any process starts also checks that two simulators made with the same seeds
reset to the same observations.

The simulator here is a bank of ``n`` rooms, each with a heater/cooler to control. Run it
from the repository root::

    python examples/batched_sim.py          # or: python -m examples.batched_sim
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

import fastrl

LEAK = 0.05  # per step, a room loses this fraction of its difference to the outside
POWER = 1.0  # degrees per step the heater/cooler adds at full power (action +-1)
OUTSIDE = (5.0, 30.0)  # outside temperature range, degrees
SETPOINT = (18.0, 24.0)  # target room temperature range, degrees
START = (10.0, 30.0)  # room temperature range at the start of an episode, degrees
SCALE = 10.0  # observations are temperature differences in tens of degrees


class Thermostats:
    """``len(seeds)`` rooms, one env each: keep the room at its setpoint.

    Every episode draws an outside temperature, a setpoint and a start temperature for
    its room. Each step the room's temperature moves ``LEAK`` of the way to the outside
    temperature, plus ``POWER * action`` (the action, clipped to [-1, 1], heats when
    positive and cools when negative). Holding a setpoint takes at most ~0.95 of full power,
    so every setpoint can be held.

    Observation (float32): (room - setpoint) / 10 and (outside - setpoint) / 10.
    Reward: minus the room's distance from its setpoint in degrees, every step; an episode
    is truncated after ``max_steps`` steps and never terminates. A random policy lets the
    room drift to the outside temperature; a good one gets there within a few steps and
    holds it.
    """

    def __init__(self, seeds: list[int], max_steps: int = 100) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.num_envs = n = len(seeds)
        self.seeds = list(seeds)
        self.max_steps = max_steps
        # One generator per env: env i's episodes depend on seeds[i] only.
        self._rngs = [np.random.default_rng(s) for s in seeds]
        self.room = np.zeros(n)
        self.outside = np.zeros(n)
        self.setpoint = np.zeros(n)
        self.steps = np.zeros(n, np.int64)
        self._obs = np.zeros((n, 2), np.float32)  # reset()'s, reused

    def _new_episodes(self, envs: np.ndarray) -> None:
        """Draw outside temperature, setpoint and start temperature for ``envs``."""
        for i in envs:
            rng = self._rngs[i]
            self.outside[i] = rng.uniform(*OUTSIDE)
            self.setpoint[i] = rng.uniform(*SETPOINT)
            self.room[i] = rng.uniform(*START)
        self.steps[envs] = 0

    def _observe(self, out: np.ndarray) -> np.ndarray:
        out[:, 0] = (self.room - self.setpoint) / SCALE
        out[:, 1] = (self.outside - self.setpoint) / SCALE
        return out

    def reset(self) -> np.ndarray:
        """Reseed every env from its seed and start new episodes: ``obs[n, 2]``."""
        self._rngs = [np.random.default_rng(s) for s in self.seeds]
        self._new_episodes(np.arange(self.num_envs))
        return self._observe(self._obs)

    def step_into(self, actions: np.ndarray, out) -> None:
        """Heat or cool every room for one step, written into ``out``; rooms whose episode
        ends start a new one in this same call (``out.final_obs`` gets their last
        observation)."""
        power = np.clip(np.asarray(actions, np.float64).reshape(self.num_envs), -1, 1)
        self.room += LEAK * (self.outside - self.room) + POWER * power
        self.steps += 1
        out.reward[:] = -np.abs(self.room - self.setpoint)
        out.terminated[:] = False  # no room ever ends its episode early
        np.greater_equal(self.steps, self.max_steps, out=out.truncated)
        ended = np.flatnonzero(out.truncated)
        if len(ended):
            self._observe(out.final_obs)  # rows of envs that did not end are not read
            self._new_episodes(ended)
        self._observe(out.obs)

    def close(self) -> None:
        """Nothing to free: the simulator holds only numpy arrays."""


def make_sim(seeds: list[int], **kwargs) -> Thermostats:
    """The factory fastrl calls in each worker: ``make_sim(seeds, **config.env.kwargs)``."""
    return Thermostats(seeds, **kwargs)


def config(*overrides: str) -> fastrl.MainConfig:
    """PPO settings that learn Thermostats in a few tens of thousands of steps;
    ``overrides`` (``key=value``) go on top, as on the command line."""
    return fastrl.load_config(None, [
        "env.id=Thermostats",       # a name for run directories and logs
        "algo.name=ppo",
        "algo.lr=1e-3",
        "algo.total_steps=100000",
        "algo.target_return=-100",  # stop once the evaluation averages this
        "infra.num_workers=2",
        "infra.envs_per_worker=8",
        "infra.rollout_len=64",
        "log.eval_every_steps=4096",
        "log.console=false",
        *overrides,
    ])


def main() -> None:
    """Train Thermostats and print what the run produced."""
    result = fastrl.Trainer(config(), vector_env_fn=make_sim).fit()
    print(f"{result.global_step} steps in {result.wall_s:.0f} s; evaluation return "
          f"{result.eval['return_mean']:.0f} (random actions get about -600); "
          f"run directory {result.run_dir}")


if __name__ == "__main__":  # worker processes re-import this file: train only when run
    main()
