"""The interface between workers and anything that steps many envs at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np
from gymnasium import spaces


class StepRows(NamedTuple):
    """Where one step of ``n`` envs goes: ``obs`` ``[n, *obs]`` the next observations (a
    fresh one where an episode ended), ``reward`` ``[n]`` float32, ``terminated`` and
    ``truncated`` ``[n]`` bool, ``final_obs`` ``[n, *obs]`` the real last observation where
    an episode ended (rows of the others are not read). In a worker the first four are rows
    of the shared-memory slot being filled and ``final_obs`` rows of the worker's own (the
    slot keeps only truncated episodes' final observations), all holding stale bytes of
    earlier steps: a simulator writes every field and keeps no reference to them. The
    field order is that of ``step``'s 5-tuple."""

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray


class SlotRows(NamedTuple):
    """Where ``T`` steps of ``n`` envs go (:meth:`BatchedEnv.rollout_into`): ``obs``
    ``[T, n, *obs]`` holds the observation before each step (``obs[0]`` is given; step
    ``t`` writes ``obs[t + 1]``, the last step writes ``next_obs`` ``[n, *obs]``);
    ``reward``, ``terminated``, ``truncated`` ``[T, n]`` and ``final_obs`` ``[T, n, *obs]``
    as :class:`StepRows` per step."""

    obs: np.ndarray
    next_obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray

    def step(self, t: int) -> StepRows:
        """The rows step ``t`` writes."""
        nxt = self.obs[t + 1] if t + 1 < len(self.obs) else self.next_obs
        return StepRows(nxt, self.reward[t], self.terminated[t], self.truncated[t],
                        self.final_obs[t])


class BatchedEnv(Protocol):
    """``num_envs`` envs stepped by one call, arrays in and arrays out.

    ``observation_space`` / ``action_space`` are the spaces of *one* env. A step resets
    each env whose episode ended in that same call (so no step is ever a fake autoreset
    transition). It comes in either of two forms, and a simulator implements at least one:

    - ``step(actions)`` returns ``(obs, reward, terminated, truncated, final_obs)`` (the
      fields of :class:`StepRows`) in arrays of its own, which the next call may reuse;
      fastrl copies them into the shared-memory slot;
    - ``step_into(actions, out)`` writes them into ``out``, a :class:`StepRows` of views of
      the slot itself (final observations aside): nothing else is copied between the
      simulator and the ring.

    Optionally, ``rollout_into(actions, out)`` steps ``T = len(actions)`` times with the
    given actions into a :class:`SlotRows` in one call: workers that act without looking
    at observations (random actions) fill a whole slot with it (one call must take less
    than ``infra.worker_timeout_s``: the worker's heartbeat waits for it). fastrl's simulators
    (:class:`~fastrl.envs.cartpole.BatchedCartPole`, :class:`~fastrl.envs.catch.BatchedCatch`
    and :class:`~fastrl.envs.source.EnvGroup` over Gymnasium envs) implement ``step`` and
    ``step_into``; the numba CartPole also ``rollout_into``.

    A simulator may also declare ``max_episode_steps``: the step count at which it
    truncates an episode, and the only cause of a truncation. Then a slot keeps room for
    ``ceil(rollout_len / max_episode_steps)`` final observations per env instead of one per
    step (fastrl.memory.layout.final_obs_rows); a simulator that truncates more often
    stops the run with an :class:`~fastrl.envs.errors.EnvContractError`.
    """

    observation_space: spaces.Space
    action_space: spaces.Space
    num_envs: int

    def reset(self) -> np.ndarray:
        """Reset every env with its seed; returns the first observations ``[n, *obs]``."""
        ...

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step every env once (see the class doc for the returned arrays)."""
        ...

    def close(self) -> None:
        """Free the simulator's resources."""
        ...


def own_rows(num_envs: int, obs_shape: tuple[int, ...], obs_dtype: np.dtype) -> StepRows:
    """Zeroed :class:`StepRows` of ``num_envs`` envs: what ``step`` returns from a simulator
    that writes with ``step_into``."""
    obs = np.zeros((num_envs, *obs_shape), obs_dtype)
    return StepRows(obs, np.zeros(num_envs, np.float32), np.zeros(num_envs, np.bool_),
                    np.zeros(num_envs, np.bool_), np.zeros_like(obs))


class WritesRows:
    """Base of fastrl's simulators, which write with ``step_into``: ``step`` writes into rows
    of their own (``_rows``, from :func:`own_rows`) and returns them."""

    _rows: StepRows

    def step_into(self, actions: np.ndarray, out: StepRows) -> None:
        """Step every env once into ``out`` (see :class:`BatchedEnv`)."""
        raise NotImplementedError

    def step(self, actions: np.ndarray) -> StepRows:
        """Step every env once into this simulator's own rows and return them (see
        :class:`BatchedEnv`); the next call reuses them."""
        self.step_into(actions, self._rows)
        return self._rows

    def __setstate__(self, state: dict) -> None:
        # Parked (pickled) by a fastrl whose simulators kept one array per field: a resumed
        # run continues those episodes all the same.
        if "_rows" not in state and "_obs" in state:
            state["_rows"] = StepRows(*(state.pop(k) for k in ("_obs", "_reward", "_term",
                                                                 "_trunc", "_final")))
        self.__dict__.update(state)


def copy_step(result: tuple, out: StepRows) -> None:
    """Put a ``step`` result into ``out``: every field, and ``final_obs`` only in the rows
    of the envs whose episode ended (the only ones read)."""
    obs, reward, terminated, truncated, final_obs = result
    out.obs[...] = obs
    out.reward[...] = reward
    out.terminated[...] = terminated
    out.truncated[...] = truncated
    ended = np.flatnonzero(out.terminated | out.truncated)
    if len(ended):
        out.final_obs[ended] = np.asarray(final_obs)[ended]


def step_into_of(envs: BatchedEnv):
    """``envs.step_into``, or for a simulator with only ``step``, a function that calls it
    and copies the result into the rows given (:func:`copy_step`)."""
    step_into = getattr(envs, "step_into", None)
    if step_into is not None:
        return step_into

    def step_and_copy(actions: np.ndarray, out: StepRows) -> None:
        copy_step(envs.step(actions), out)

    return step_and_copy


def weighs_rows(envs: BatchedEnv) -> bool:
    """A slot of ``envs`` carries a ``weight`` per step and row: a multi-agent simulator's
    (it declares ``agents``: rows may be padding, or act without training)."""
    return bool(getattr(envs, "agents", None))


def live_rows_of(envs: BatchedEnv) -> Callable[[], np.ndarray] | None:
    """For a multi-agent simulator that says which rows are live agents (its ``active``
    ``[n]``, fastrl.envs.multiagent), a function returning them now: the weight of the next
    step of each row (0: padding, which neither trains nor counts); None for the others,
    whose every row is live."""
    if getattr(envs, "active", None) is None:
        return None
    return lambda: envs.active


def checked_discrete_actions(actions: np.ndarray, shape: tuple[int, ...], n: int,
                             simulator: str) -> np.ndarray:
    """``actions`` as an array of ``shape`` (``[num_envs]`` for a step, ``[T, num_envs]`` for
    a rollout) of classes in ``0..n-1``; a ValueError naming ``simulator`` and what it got
    otherwise (fastrl's own numba simulators check here)."""
    actions = np.asarray(actions)
    if actions.shape != shape or actions.min() < 0 or actions.max() >= n:
        classes = ", ".join(str(a) for a in range(n))
        raise ValueError(f"{simulator} takes actions of shape {shape} in {{{classes}}}, got "
                         f"shape {actions.shape} values {np.unique(actions)[:5]}")
    return actions
