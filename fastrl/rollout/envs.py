"""A group of single Gymnasium envs stepped in lockstep, reset by hand.

fastrl does not use Gymnasium's vector envs here: their default next-step autoreset turns
the step after an episode end into a fake transition (the action ignored, reward 0). Resetting
each env ourselves, in the same step that ended its episode, means every stored transition is
real and the true final observation is in hand for truncation bootstrapping.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from fastrl.envs import BUILTIN_BATCHED, BatchedEnv
from fastrl.memory.layout import storage_of


class EnvError(ValueError):
    """An env that cannot be made, or that breaks the contract of its declared spaces."""


class EnvContractError(EnvError):
    """An env returned something that does not match its declared spaces."""


def env_seeds(run_seed: int, worker_id: int, num_envs: int, incarnation: int = 0) -> list[int]:
    """Deterministic, distinct per-env seeds for one worker; a restarted worker (incarnation
    k > 0) gets fresh ones, so that it does not replay the episodes of the one it replaces."""
    seq = np.random.SeedSequence([run_seed, worker_id, *([incarnation] if incarnation else [])])
    return [int(s) for s in seq.generate_state(num_envs, np.uint32)]


def make_env(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    """``gymnasium.make`` with fastrl's config arguments; failures become :class:`EnvError`."""
    try:
        return gym.make(env_id, **kwargs)
    except (gym.error.Error, ImportError, TypeError) as e:
        raise cannot_make(env_id, kwargs, e) from e


def cannot_make(env_id: str, kwargs: dict[str, Any], cause: Exception) -> EnvError:
    """The error for an env that could not be constructed, naming the id and kwargs."""
    return EnvError(f"cannot make env '{env_id}' (env.kwargs={kwargs}): {cause}")


def make_env_group(env_id: str, kwargs: dict[str, Any], seeds: list[int]) -> BatchedEnv:
    """One env per seed: a built-in batched simulator when ``env_id`` names one
    (``fastrl/CartPole-v1``), else Gymnasium envs in an :class:`EnvGroup`."""
    if env_id in BUILTIN_BATCHED:
        try:
            return BUILTIN_BATCHED[env_id](seeds, **kwargs)
        except TypeError as e:
            raise cannot_make(env_id, kwargs, e) from e
    return EnvGroup(env_id, kwargs, seeds)


class EnvGroup:
    """``len(seeds)`` Gymnasium envs of one id behind the :class:`BatchedEnv` interface."""

    def __init__(self, env_id: str, kwargs: dict[str, Any], seeds: list[int]) -> None:
        self.envs = [make_env(env_id, kwargs) for _ in seeds]
        self._step_fns = [env.step for env in self.envs]
        self.env_id = env_id
        self.seeds = seeds
        self.num_envs = len(seeds)
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self._obs_shape, self._obs_dtype = storage_of(self.observation_space, "observation")
        self._box_action = isinstance(self.action_space, gym.spaces.Box)
        n = len(seeds)
        self._obs = np.zeros((n, *self._obs_shape), self._obs_dtype)
        self._final = np.zeros_like(self._obs)
        self._reward = np.zeros(n, np.float32)
        self._term = np.zeros(n, np.bool_)
        self._trunc = np.zeros(n, np.bool_)

    def _store_obs(self, out: np.ndarray, i: int, obs: Any) -> None:
        arr = np.asarray(obs)
        if arr.shape != self._obs_shape:
            raise EnvContractError(
                f"env {self.env_id!r} returned an observation of shape {arr.shape}; its "
                f"observation space {self.observation_space} declares {self._obs_shape}"
            )
        out[i] = arr

    def _store_all(self, out: np.ndarray, observations: list) -> None:
        """``out[:] = observations`` in one conversion; per env (to name the culprit) when
        a shape is wrong."""
        try:
            arr = np.array(observations)
        except ValueError:  # ragged shapes
            arr = None
        if arr is None or arr.shape[1:] != self._obs_shape:
            for i, obs in enumerate(observations):
                self._store_obs(out, i, obs)
            return
        out[:] = arr

    def reset(self) -> np.ndarray:
        """Reset every env with its seed; returns the first observations ``[n, *obs]``."""
        for i, (env, seed) in enumerate(zip(self.envs, self.seeds)):
            obs, _ = env.reset(seed=seed)
            self._store_obs(self._obs, i, obs)
        return self._obs

    def step(self, actions: np.ndarray):
        """Step every env once; envs whose episode ended are reset in the same call.

        Returns ``(obs, reward, terminated, truncated, final_obs)``: ``obs`` is the next
        observation (a reset one where the episode ended), ``final_obs[i]`` the real last
        observation of env ``i`` where it ended (stale elsewhere). The arrays are reused by
        the next call.
        """
        if self._box_action:
            actions = np.clip(actions, self.action_space.low, self.action_space.high)
        # Iterating the array hands each env a numpy scalar, which Gymnasium's
        # Discrete.contains checks faster than a Python int.
        # The per-env Python cost is what bounds collection speed, so the loop is one list
        # comprehension over bound methods and every field is written by one array store.
        results = [step(a) for step, a in zip(self._step_fns, actions)]
        observations, rewards, terms, truncs, _ = zip(*results)
        self._reward[:] = rewards
        self._term[:] = terms
        self._trunc[:] = truncs
        ended = np.flatnonzero(self._term | self._trunc)
        if len(ended):
            observations = list(observations)
            for i in ended.tolist():
                self._store_obs(self._final, i, observations[i])
                observations[i], _ = self.envs[i].reset()
        self._store_all(self._obs, observations)
        return self._obs, self._reward, self._term, self._trunc, self._final

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()
