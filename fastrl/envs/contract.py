"""The env contract fastrl relies on, and the checks that hold envs to it.

A Gymnasium-API env must return observations of its observation space's shape and dtype,
a finite real scalar reward, and bool ``terminated`` / ``truncated``; ``reset(seed=s)`` must
give the same first observation for the same seed. A batched simulator
(:class:`~fastrl.envs.batched.BatchedEnv`) returns the same per env, stacked into arrays.
A violation names the env, the field, what was expected and what came.

:func:`check_env` holds an env to this contract for a few dozen steps before any process
starts; workers keep checking what they can afford on every step (see
:class:`~fastrl.envs.source.EnvGroup` and :func:`fastrl.envs.errors.check_batch_arrays`).
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils.env_checker import data_equivalence

from fastrl.envs.errors import EnvContractError, contract_violation, record_violation
from fastrl.envs.multiagent import is_multi_agent
from fastrl.envs.source import EnvSource
from fastrl.memory.layout import storage_of
from fastrl.memory.records import MASK_KEY, obs_record


def check_env(source: EnvSource, seed: int, steps: int = 64) -> None:
    """Hold the envs of ``source`` to the contract before any process starts.

    A Gymnasium-API env is reset with ``seed``, compared with a fresh env reset with the same
    seed, then stepped ``steps`` times with seeded random actions (reset whenever an episode
    ends); every observation, reward, flag and info is checked. A batched simulator, or a
    PettingZoo env as its rows (fastrl.envs.multiagent), is made for ``[seed, seed + 1]``,
    compared likewise with a second instance, and stepped ``steps`` times. Every env made
    is closed. Raises :class:`EnvContractError` naming the env, the call, the field, what
    was expected and what came.
    """
    if source.batched:
        _check_batched_env(source, seed, steps)
    else:
        _check_gym_env(source, seed, steps)


def _seeded_sampler(space: spaces.Space, seed: int) -> Callable[[], Any]:
    """``space.sample`` from a copy seeded with ``seed``: the env's own space (which a
    factory may share between envs) keeps its random state."""
    space = copy.deepcopy(space)
    space.seed(seed)
    return space.sample


def _same_first_obs(env_id: str, where: str, first: Any, again: Any) -> None:
    """A fresh env reset with the same seed must start where the first one did."""
    if not data_equivalence(first, again, exact=True):
        raise EnvContractError(
            f"env {env_id!r} broke the env contract in {where}: the first observation should "
            f"be the same for the same seed, got {_preview(first)} from one env and "
            f"{_preview(again)} from a second one; the seed must seed the env's random "
            "generator (call super().reset(seed=seed) and draw from self.np_random)")


def _preview(value: Any) -> str:
    """A value on one short line, for an error message."""
    return " ".join(repr(value).split())[:120]


# --- Gymnasium-API envs -----------------------------------------------------------------


def _check_gym_env(source: EnvSource, seed: int, steps: int) -> None:
    env_id = source.env_id
    env = source.make_one()
    if is_multi_agent(env):  # made parallel: checked as rows, as a batched simulator is
        env.close()
        _check_batched_env(source, seed, steps)
        return
    with contextlib.closing(env):
        check_obs = _obs_checker(env_id, env.observation_space)
        where = f"reset(seed={seed})"
        first = copy.deepcopy(_checked_reset(env_id, where, env.reset(seed=seed), check_obs))
        with contextlib.closing(source.make_one()) as fresh:
            again = _checked_reset(env_id, where, fresh.reset(seed=seed), check_obs)
            _same_first_obs(env_id, where, first, again)
        sample = _seeded_sampler(env.action_space, seed)
        obs = first
        for t in range(steps):
            result = env.step(sample(**_legal(obs, env.action_space)))
            obs = result[0] if isinstance(result, tuple) and result else None
            if _checked_step(env_id, f"step() (check step {t + 1})", result, check_obs):
                obs = _checked_reset(env_id, "reset() after an episode ended", env.reset(),
                                     check_obs)


def _legal(obs: Any, space: spaces.Space) -> dict[str, Any]:
    """``space.sample``'s arguments for a legal action: the observation's action mask (as
    int8 flags), if it has one and the actions are Discrete (what fastrl masks)."""
    if isinstance(space, spaces.Discrete) and isinstance(obs, dict) and MASK_KEY in obs:
        mask = np.asarray(obs[MASK_KEY]) != 0
        if mask.any():
            return {"mask": mask.astype(np.int8)}
    return {}


def _obs_checker(env_id: str, space: spaces.Space) -> Callable[[str, Any], None]:
    """A check of one observation against the storage of ``space``: a Box observation must
    have the space's exact dtype (as workers require), other spaces' values must cast to
    their storage dtype (workers convert them). A Dict or Tuple observation is checked
    leaf by leaf, alike."""
    record = obs_record(space)
    if record is not None:
        def check_record(where: str, obs: Any) -> None:
            wrong = record.check(obs)
            if wrong:
                raise record_violation(env_id, where, "the observation", wrong)

        return check_record
    shape, dtype = storage_of(space, "observation")
    strict = isinstance(space, spaces.Box)
    expected = f"a {dtype} array of shape {shape}" + ("" if strict else " (or castable to it)")

    def check_obs(where: str, obs: Any) -> None:
        try:
            arr = np.asarray(obs)
        except ValueError:  # ragged nested sequences
            raise contract_violation(env_id, where, "the observation", expected, obs) from None
        if arr.shape != shape or (arr.dtype != dtype if strict else
                                  not np.can_cast(arr.dtype, dtype, "same_kind")):
            raise contract_violation(env_id, where, "the observation",
                                     f"{expected} (its observation space is {space})", arr)

    return check_obs


def _checked_reset(env_id: str, where: str, result: Any,
                   check_obs: Callable[[str, Any], None]) -> Any:
    """The observation of a checked ``reset`` result ``(obs, info)``."""
    if not isinstance(result, tuple) or len(result) != 2:
        raise contract_violation(env_id, where, "the result", "a 2-tuple (obs, info)", result)
    obs, info = result
    check_obs(where, obs)
    _check_info(env_id, where, info)
    return obs


def _checked_step(env_id: str, where: str, result: Any,
                  check_obs: Callable[[str, Any], None]) -> bool:
    """Check a ``step`` result ``(obs, reward, terminated, truncated, info)``; True when
    the episode ended."""
    if not isinstance(result, tuple) or len(result) != 5:
        raise contract_violation(env_id, where, "the result", "a 5-tuple (obs, reward, "
                                 "terminated, truncated, info)", result)
    obs, reward, terminated, truncated, info = result
    check_obs(where, obs)
    _check_reward(env_id, where, reward)
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flag, (bool, np.bool_)):
            raise contract_violation(env_id, where, name, "a bool (Python or numpy)", flag)
    _check_info(env_id, where, info)
    return bool(terminated or truncated)


def _check_reward(env_id: str, where: str, reward: Any) -> None:
    """A finite real scalar: a Python or numpy int or float, or a 0-d real array; a bool is
    refused (it is an int to Python, but a flag put in the wrong place)."""
    real = isinstance(reward, (int, float, np.integer, np.floating)) and \
        not isinstance(reward, bool) or \
        isinstance(reward, np.ndarray) and reward.ndim == 0 and reward.dtype.kind in "fiu"
    if not real:
        raise contract_violation(env_id, where, "the reward", "a real scalar (a Python or "
                                 "numpy int or float; not a bool, not an array of values)",
                                 reward)
    if not math.isfinite(float(reward)):
        raise contract_violation(env_id, where, "the reward", "a finite number", reward)


def _check_info(env_id: str, where: str, info: Any) -> None:
    if not isinstance(info, dict):
        raise contract_violation(env_id, where, "info", "a dict", info)


# --- batched simulators -----------------------------------------------------------------


def _check_batched_env(source: EnvSource, seed: int, steps: int) -> None:
    """A user's simulator comes wrapped in a CheckedBatchedEnv, whose every reset and step
    runs :func:`check_batch_arrays` (fastrl's own simulators are trusted); this adds the
    seeding check and drives the steps."""
    seeds = [seed, seed + 1]
    with contextlib.closing(source.make(seeds)) as sim:
        first = np.array(sim.reset())  # a copy: the simulator may reuse its arrays
        with contextlib.closing(source.make(seeds)) as fresh:
            _same_first_obs(source.env_id, f"reset() of seeds {seeds}", first, fresh.reset())
        _, dtype = storage_of(sim.action_space, "action")  # as workers hand actions over
        sample = _seeded_sampler(sim.action_space, seed)
        masks = _batch_masks(sim.observation_space)
        obs = first
        for _ in range(steps):
            actions = [sample(**_legal(masks(obs, i), sim.action_space))
                       for i in range(sim.num_envs)]
            obs = sim.step(np.array(actions, dtype))[0]


def _batch_masks(space: spaces.Space) -> Callable[[np.ndarray, int], Any]:
    """``(records, i) -> {"action_mask": flags}`` of env ``i`` where the observations carry
    an action mask, else ``{}``: what :func:`_legal` reads."""
    record = obs_record(space)
    leaf = record.mask if record is not None else None
    if leaf is None:
        return lambda obs, i: {}
    return lambda obs, i: {MASK_KEY: leaf.view(np.asarray(obs))[i]}
