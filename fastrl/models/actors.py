"""What picks the workers' actions: the policy network, or uniform random actions.

An actor maps a batch of observations ``[n, *obs]`` to numpy ``(action, log_prob, value)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from gymnasium import spaces

Actor = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def policy_actor(policy: torch.nn.Module) -> Actor:
    """Batched CPU inference of ``policy`` (one forward per step for all envs): any module
    with the ``act(obs) -> (action, log_prob, value)`` of fastrl.models."""

    def act(obs: np.ndarray):
        action, log_prob, value = policy.act(torch.from_numpy(obs))
        return action.numpy(), log_prob.numpy(), value.numpy()

    return act


RANDOM_TABLE = 4096  # steps of random actions drawn at a time


def _random_table(space: spaces.Space, shape: tuple[int, int],
                  rng: np.random.Generator) -> np.ndarray:
    """Uniform random actions ``[*shape, *action]`` of ``space`` (unbounded Box dimensions
    drawn from [-1, 1])."""
    if isinstance(space, spaces.Discrete):
        return space.start + rng.integers(space.n, size=shape)
    if isinstance(space, spaces.MultiDiscrete):
        return space.start + rng.integers(space.nvec, size=(*shape, *space.nvec.shape))
    if isinstance(space, spaces.MultiBinary):
        return rng.integers(2, size=(*shape, *np.atleast_1d(space.n)), dtype=np.int8)
    if isinstance(space, spaces.Box):
        low = np.where(np.isfinite(space.low), space.low, -1.0)
        high = np.where(np.isfinite(space.high), space.high, 1.0)
        return rng.uniform(low, high, size=(*shape, *space.shape)).astype(space.dtype)
    raise TypeError(f"no random actions for {space}")


def random_actor(space: spaces.Space, num_envs: int, seed: int) -> Actor:
    """Uniform random actions for ``num_envs`` envs; log_prob and value are zeros (nothing
    trains on them: ``algo.name=none``, or off-policy exploration before the first update).
    Actions are drawn 4096 steps at a time, so that one costs nothing per step (as in the
    bench's peer loops), and drawn afresh once used up: they never repeat."""
    rng = np.random.default_rng(seed)
    zeros = np.zeros(num_envs, np.float32)
    table = _random_table(space, (RANDOM_TABLE, num_envs), rng)
    step = 0

    def act(obs: np.ndarray):
        nonlocal step, table
        if step == RANDOM_TABLE:
            table, step = _random_table(space, (RANDOM_TABLE, num_envs), rng), 0
        step += 1
        return table[step - 1], zeros, zeros

    return act
