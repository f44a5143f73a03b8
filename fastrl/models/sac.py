"""SAC networks: a tanh-squashed Gaussian actor (what workers run) and a twin Q critic."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from fastrl.models.encoders import obs_features
from fastrl.models.policy import UnsupportedActionSpace, mlp

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # CleanRL's bounds: keeps the Gaussian well-conditioned


def _check_bounded_box(act_space: spaces.Space) -> None:
    if not isinstance(act_space, spaces.Box):
        raise UnsupportedActionSpace(
            f"SAC acts in a Box action space, not {act_space}; use algo.name=dqn for Discrete"
        )
    if not (np.isfinite(act_space.low).all() and np.isfinite(act_space.high).all()):
        raise UnsupportedActionSpace(
            f"SAC squashes actions into the action space's bounds; {act_space} has infinite "
            "ones (wrap the env with gymnasium.wrappers.RescaleAction or clip it)"
        )


class SquashedGaussianActor(nn.Module):
    """``a = tanh(u) * scale + bias`` with ``u ~ N(mu(s), sigma(s))``: actions always inside
    the Box bounds, log-probabilities corrected for the squashing."""

    def __init__(self, obs_space: spaces.Space, act_space: spaces.Space,
                 hidden: list[int], body: nn.Module | None = None) -> None:
        super().__init__()
        _check_bounded_box(act_space)
        self._features = obs_features(obs_space)
        self.act_shape = tuple(act_space.shape)
        n_act = int(np.prod(act_space.shape))
        # body: features [B, obs_size] -> [B, 2 * n_act]; a user's plain module (models.base)
        self.net = body if body is not None else \
            mlp(self._features.size, hidden, 2 * n_act, 0.01, nn.ReLU)
        low = torch.as_tensor(act_space.low, dtype=torch.float32).flatten()
        high = torch.as_tensor(act_space.high, dtype=torch.float32).flatten()
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("bias", (high + low) / 2)

    def _normal(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.net(self._features(obs)).chunk(2, dim=-1)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(log_std) + 1)
        return mean, log_std

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised ``(flat action [..., n_act], log_prob [...])`` for training."""
        mean, log_std = self._normal(obs)
        std = log_std.exp()
        u = mean + std * torch.randn_like(mean)
        squashed = torch.tanh(u)
        # log N(u) - log|det d a / d u|, per dimension, summed
        log_prob = (-0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * np.log(2 * np.pi)
                    - torch.log(self.scale * (1 - squashed ** 2) + 1e-6)).sum(-1)
        return squashed * self.scale + self.bias, log_prob

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False):
        """``(action, log_prob, zeros)``: the rollout/evaluation interface of
        :class:`~fastrl.models.policy.ActorCritic`; ``deterministic`` squashes the mean."""
        if deterministic:
            mean, _ = self._normal(obs)
            flat = torch.tanh(mean) * self.scale + self.bias
            log_prob = flat.new_zeros(flat.shape[:-1])
        else:
            flat, log_prob = self.sample(obs)
        action = flat.reshape(*flat.shape[:-1], *self.act_shape)
        return action, log_prob, torch.zeros_like(log_prob)


class TwinQ(nn.Module):
    """Two independent ``Q(s, a)`` MLPs (clipped double-Q)."""

    def __init__(self, obs_space: spaces.Space, act_space: spaces.Space,
                 hidden: list[int], body: nn.Module | None = None) -> None:
        super().__init__()
        _check_bounded_box(act_space)
        self._features = obs_features(obs_space)
        n_in = self._features.size + int(np.prod(act_space.shape))
        self.q1 = mlp(n_in, hidden, 1, 1.0, nn.ReLU)
        self.q2 = mlp(n_in, hidden, 1, 1.0, nn.ReLU)

    def forward(self, obs: torch.Tensor, flat_action: torch.Tensor):
        """``(Q1, Q2)`` of a batch, each ``[batch]``."""
        x = torch.cat([self._features(obs), flat_action], -1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)
