"""The unit of data an actor-critic's minibatches take, chosen once per policy: flat
transitions for a feed-forward policy, whole env sequences for a recurrent one
(fastrl.models.recurrent). PPO, A2C and APPO read a batch only through it.

A batch is time-major ``[T, N]`` (fastrl.algos.ppo). A recurrent policy's batch also
carries ``core_state`` ``[N, state_size]``, each env's state at the batch's first step;
its sequences are replayed from there, and values after a step are taken from the state
after it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from fastrl.models.recurrent import episode_starts, is_recurrent

#: ``value_after(obs, env, step)``: the values of observations ``obs`` ``[B, ...]`` seen
#: by env columns ``env`` right after their step ``step`` (int tensors broadcasting to
#: ``[B]``)
ValueAfter = Callable[[torch.Tensor, torch.Tensor, Any], torch.Tensor]


class Transitions:
    """Flat transitions ``[T*N, ...]``: a feed-forward policy reads each step alone."""

    def __init__(self, policy: nn.Module) -> None:
        self.policy = policy

    def value_after(self, batch: dict[str, torch.Tensor]) -> ValueAfter:
        """Values from the observations alone."""
        return lambda obs, env, step: self.policy.value(obs)

    def evaluate_batch(self, batch: dict[str, torch.Tensor]):
        """``(log_prob, entropy, value)`` ``[T, N]`` of the batch's actions."""
        shape = batch["reward"].shape
        out = self.policy.evaluate(batch["obs"].flatten(0, 1), batch["action"].flatten(0, 1))
        return tuple(x.view(shape) for x in out)

    def split(self, batch: dict[str, torch.Tensor],
              keys: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """The fields ``keys`` of the batch as units along dim 0: ``[T*N, ...]``."""
        return {k: batch[k].flatten(0, 1) for k in keys}

    def evaluate(self, data: dict[str, torch.Tensor], mb: Any):
        """``(log_prob, entropy, value)`` of the units ``mb`` of :meth:`split`'s ``data``."""
        return self.policy.evaluate(data["obs"][mb], data["action"][mb])


class Sequences:
    """Whole env sequences ``[N, T, ...]``: a recurrent policy replays each env's column
    from its stored state, restarting where an episode starts."""

    def __init__(self, policy: nn.Module) -> None:
        self.policy = policy

    def value_after(self, batch: dict[str, torch.Tensor]) -> ValueAfter:
        """Values from the state after each step (the batch unrolled once)."""
        first = episode_starts(batch["terminated"], batch["truncated"])
        states = self.policy.unroll(batch["obs"], first, batch["core_state"])  # [T, N, S]
        return lambda obs, env, step: self.policy.value(obs, states[step, env])

    def evaluate_batch(self, batch: dict[str, torch.Tensor]):
        """``(log_prob, entropy, value)`` ``[T, N]``: every env's sequence replayed."""
        first = episode_starts(batch["terminated"], batch["truncated"])
        return self.policy.evaluate_sequences(batch["obs"], batch["action"], first,
                                              batch["core_state"])

    def split(self, batch: dict[str, torch.Tensor],
              keys: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """The fields ``keys`` as env sequences ``[N, T, ...]``, with ``first`` (where an
        episode starts) and ``core_state``."""
        first = episode_starts(batch["terminated"], batch["truncated"])
        return {**{k: batch[k].transpose(0, 1) for k in keys},
                "first": first.T, "core_state": batch["core_state"]}

    def evaluate(self, data: dict[str, torch.Tensor], mb: Any):
        """``(log_prob, entropy, value)`` of the sequences ``mb``, shaped ``[n, T]``."""
        out = self.policy.evaluate_sequences(
            data["obs"][mb].transpose(0, 1), data["action"][mb].transpose(0, 1),
            data["first"][mb].T, data["core_state"][mb])
        return tuple(x.T for x in out)


def units_of(policy: nn.Module) -> Transitions | Sequences:
    """The unit ``policy`` trains on: sequences for a recurrent policy, else transitions."""
    return Sequences(policy) if is_recurrent(policy) else Transitions(policy)
