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


def random_actor(space: spaces.Space, num_envs: int, seed: int) -> Actor:
    """Uniform random actions for ``num_envs`` envs, drawn in one call per step; log_prob
    and value are zeros (nothing trains on them: ``algo.name=none``)."""
    rng = np.random.default_rng(seed)
    zeros = np.zeros(num_envs, np.float32)
    if isinstance(space, spaces.Discrete):
        def draw():
            return space.start + rng.integers(space.n, size=num_envs)
    elif isinstance(space, spaces.MultiDiscrete):
        def draw():
            return space.start + rng.integers(space.nvec, size=(num_envs, *space.nvec.shape))
    elif isinstance(space, spaces.MultiBinary):
        def draw():
            return rng.integers(2, size=(num_envs, *np.atleast_1d(space.n)), dtype=np.int8)
    elif isinstance(space, spaces.Box):
        low = np.where(np.isfinite(space.low), space.low, -1.0)
        high = np.where(np.isfinite(space.high), space.high, 1.0)

        def draw():
            return rng.uniform(low, high, size=(num_envs, *space.shape)).astype(space.dtype)
    else:
        raise TypeError(f"no random actions for {space}")
    return lambda obs: (draw(), zeros, zeros)
