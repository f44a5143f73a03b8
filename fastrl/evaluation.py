"""Deterministic evaluation on a fixed seed suite: the bar a trained policy is judged by."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from fastrl.memory.wait import Stopped
from fastrl.rollout.envs import EnvSource


def evaluate(
    policy: nn.Module, env: EnvSource, seeds: list[int],
    device: torch.device | str = "cpu", max_steps: int = 100_000,
    should_stop: Callable[[], bool] = lambda: False,
) -> dict[str, float]:
    """Play the first episode of one env per seed with the policy's mode action.

    All envs step together; an env whose first episode ended keeps stepping (its later
    episodes are not counted) so that one batched forward serves every step. An episode
    still running after ``max_steps`` is cut there; ``should_stop`` is asked every step and
    raises :class:`~fastrl.memory.wait.Stopped` when true. Returns mean/std/min/max of the
    episode returns and the mean length.
    """
    envs = env.make(seeds)
    obs = envs.reset()
    returns = np.zeros(len(seeds))
    lengths = np.zeros(len(seeds), np.int64)
    live = np.ones(len(seeds), np.bool_)
    try:
        for _ in range(max_steps):
            if not live.any():
                break
            if should_stop():
                raise Stopped
            actions, _, _ = policy.act(torch.as_tensor(obs, device=device), deterministic=True)
            obs, reward, terminated, truncated, _ = envs.step(actions.cpu().numpy())
            returns += np.where(live, reward, 0.0)
            lengths += live
            live &= ~(terminated | truncated)
    finally:
        envs.close()
    return {
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "return_min": float(returns.min()),
        "return_max": float(returns.max()),
        "length_mean": float(lengths.mean()),
    }
