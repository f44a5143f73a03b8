"""What picks the workers' actions: the policy network, or uniform random actions.

An actor maps a batch of observations ``[n, *obs]`` to numpy ``(action, log_prob, value)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from gymnasium import spaces

from fastrl.models.policy import ActorCritic

Actor = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def policy_actor(policy: ActorCritic) -> Actor:
    """Batched CPU inference of ``policy`` (one forward per step for all envs)."""

    def act(obs: np.ndarray):
        action, log_prob, value = policy.act(torch.from_numpy(obs))
        return action.numpy(), log_prob.numpy(), value.numpy()

    return act


RANDOM_TABLE = 4096  # steps of random actions drawn up front and cycled through


def random_actor(space: spaces.Space, num_envs: int, seed: int) -> Actor:
    """Uniform random actions for ``num_envs`` envs; log_prob and value are zeros (nothing
    trains on them: ``algo.name=none``). A table of 4096 steps is drawn up front so that the
    action costs nothing per step, as in the bench's peer loops."""
    rng = np.random.default_rng(seed)
    zeros = np.zeros(num_envs, np.float32)
    n = RANDOM_TABLE * num_envs
    if isinstance(space, spaces.Discrete):
        table = space.start + rng.integers(space.n, size=n)
    elif isinstance(space, spaces.MultiDiscrete):
        table = space.start + rng.integers(space.nvec, size=(n, *space.nvec.shape))
    elif isinstance(space, spaces.MultiBinary):
        table = rng.integers(2, size=(n, *np.atleast_1d(space.n)), dtype=np.int8)
    elif isinstance(space, spaces.Box):
        low = np.where(np.isfinite(space.low), space.low, -1.0)
        high = np.where(np.isfinite(space.high), space.high, 1.0)
        table = rng.uniform(low, high, size=(n, *space.shape)).astype(space.dtype)
    else:
        raise TypeError(f"no random actions for {space}")
    table = table.reshape(RANDOM_TABLE, num_envs, *table.shape[1:])
    step = 0

    def act(obs: np.ndarray):
        nonlocal step
        step += 1
        return table[step % RANDOM_TABLE], zeros, zeros

    return act
