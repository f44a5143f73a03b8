"""One built-in actor-critic per agent group (``algo.policy_per_group``, docs/multi-agent.md).

A multi-agent env of several agent groups stores each row's observation as a record of its
group's index and every group's observation (fastrl.envs.multiagent.GroupLayout). This
network holds one :class:`~fastrl.models.policy.ActorCritic` per group and takes each
row's outputs from its group's: the groups learn apart (a row's loss reaches only its
group's network), in one module, one set of weights and one update.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from gymnasium import spaces
from torch import nn

from fastrl.envs.multiagent import GROUP_KEY
from fastrl.memory.records import ObsRecord
from fastrl.models.policy import ActorCritic


def has_groups(space: spaces.Space) -> bool:
    """True for the observation space of a multi-agent env of several agent groups."""
    return isinstance(space, spaces.Dict) and GROUP_KEY in space.spaces and \
        isinstance(space[GROUP_KEY], spaces.Discrete)


class GroupedActorCritic(nn.Module):
    """``act``, ``evaluate`` and ``value`` of :class:`~fastrl.models.policy.ActorCritic`,
    each row through the network of its group (``nets[g]``), told by its ``group`` leaf;
    ``heads``: the networks' other keywords (``activation``, ``ortho_init``, ...)."""

    def __init__(self, obs_space: spaces.Space, act_space: spaces.Space, hidden: list[int],
                 encoder: str = "auto", normalize_obs: bool = False, **heads: Any) -> None:
        super().__init__()
        if not has_groups(obs_space):
            raise ValueError(f"algo.policy_per_group needs the observations of a multi-agent "
                             f"env of several agent groups, not {obs_space}")
        leaf = next(x for x in ObsRecord(obs_space).leaves if x.name == GROUP_KEY)
        self._group_bytes = slice(leaf.offset, leaf.offset + leaf.nbytes)
        self.nets = nn.ModuleList(
            ActorCritic(obs_space, act_space, hidden, encoder, normalize_obs, **heads)
            for _ in range(int(obs_space[GROUP_KEY].n)))

    def groups(self, obs: torch.Tensor | dict) -> torch.Tensor:
        """The group index of each row of records ``obs`` ``[..., nbytes]`` (or of nested
        leaves, as an exported artifact hands them over: fastrl.export)."""
        if isinstance(obs, dict):
            return obs[GROUP_KEY].long()
        raw = obs[..., self._group_bytes].contiguous()
        return raw.view(torch.int64).squeeze(-1)

    def _routed(self, obs: torch.Tensor, call: Callable, *args: torch.Tensor):
        """``call(net, obs, *args)`` of every group's network, each row's outputs taken from
        its own group's. Every network sees every row: no data-dependent shapes (no host
        sync on a GPU, and an exportable graph) for a few small networks' arithmetic."""
        group = self.groups(obs)
        outputs = [call(net, obs, *args) for net in self.nets]
        picked = []
        for parts in zip(*outputs):
            out = parts[0]
            for g, part in enumerate(parts[1:], 1):
                mine = (group == g).view(*group.shape, *[1] * (part.dim() - group.dim()))
                out = torch.where(mine, part, out)
            picked.append(out)
        return tuple(picked)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values, each row by its group's critic."""
        return self._routed(obs, lambda net, o: (net.value(o),))[0]

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False):
        """``(action, log_prob, value)``, each row by its group's network."""
        return self._routed(obs, lambda net, o: net.act(o, deterministic))

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor):
        """``(log_prob, entropy, value)`` of stored actions, each row by its group's
        network."""
        return self._routed(obs, lambda net, o, a: net.evaluate(o, a), action)
