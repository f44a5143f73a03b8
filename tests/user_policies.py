"""User policies for tests/models/test_user_policy.py and tests/runtime/test_user_policies.py,
importable by spawned workers (conftest puts tests/ on their path) and named in configs as
'user_policies:...': one that fits PPO's contract, one that fits DQN's, ones that break them,
and a plain Q-network module."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Categorical

from fastrl.models.base import BasePolicy


def mlp(n_in: int, hidden: int, n_out: int) -> nn.Sequential:
    """One hidden tanh layer."""
    return nn.Sequential(nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, n_out))


class TinyActorCritic(BasePolicy):
    """PPO's contract for Discrete actions. The actor's output layer starts at zero (a
    uniform policy), so that training shows in it."""

    def __init__(self, obs_space, act_space, algo_config) -> None:
        super().__init__(obs_space, act_space, algo_config)
        n_in, hidden = self.obs_features.size, algo_config.hidden_sizes[0]
        self.actor = mlp(n_in, hidden, int(act_space.n))
        nn.init.zeros_(self.actor[-1].weight)
        nn.init.zeros_(self.actor[-1].bias)
        self.critic = mlp(n_in, hidden, 1)

    def _dist(self, obs: torch.Tensor) -> Categorical:
        return Categorical(logits=self.actor(self.obs_features(obs)))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values ``[B]``."""
        return self.critic(self.obs_features(obs)).squeeze(-1)

    def act(self, obs: torch.Tensor, deterministic: bool = False):
        """Sampled (or most probable) actions, their log-probabilities, the values."""
        dist = self._dist(obs)
        index = dist.probs.argmax(-1) if deterministic else dist.sample()
        return index + int(self.act_space.start), dist.log_prob(index), self.value(obs)

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor):
        """Log-probabilities and entropies of stored actions, and the values."""
        dist = self._dist(obs)
        return dist.log_prob(self.action_index(action)), dist.entropy(), self.value(obs)


class ColumnValue(TinyActorCritic):
    """Breaks PPO's contract: values ``[B, 1]`` instead of ``[B]``."""

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values ``[B, 1]``."""
        return self.critic(self.obs_features(obs))


class ActOnly(BasePolicy):
    """Uniform random Discrete actions: enough for ``algo.name=none``, not for PPO."""

    def __init__(self, obs_space, act_space, algo_config) -> None:
        super().__init__(obs_space, act_space, algo_config)
        self.logits = nn.Parameter(torch.zeros(int(act_space.n)))

    def act(self, obs: torch.Tensor, deterministic: bool = False):
        """Random actions; zero log-probabilities and values."""
        dist = Categorical(logits=self.logits.expand(len(obs), -1))
        zeros = torch.zeros(len(obs))
        return dist.sample() + int(self.act_space.start), zeros, zeros


class ZeroBasedQ(BasePolicy):
    """DQN's contract, except that ``act`` forgets ``Discrete.start``."""

    def __init__(self, obs_space, act_space, algo_config) -> None:
        super().__init__(obs_space, act_space, algo_config)
        self.q = mlp(self.obs_features.size, 8, int(act_space.n))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values ``[B, n]``."""
        return self.q(self.obs_features(obs))

    def act(self, obs: torch.Tensor, deterministic: bool = False):
        """Greedy column indices (not shifted by ``Discrete.start``)."""
        value, index = self(obs).max(-1)
        return index, torch.zeros_like(value), value


def q_net(n_out: int) -> nn.Module:
    """A plain Q-network module for 4 observations and ``n_out`` actions."""
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, n_out))
