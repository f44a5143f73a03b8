"""Q-network for DQN: an MLP over observations with one output per discrete action."""

from __future__ import annotations

import torch
from gymnasium import spaces
from torch import nn

from fastrl.models.encoders import make_encoder, obs_features
from fastrl.models.masks import action_mask, mask_logits
from fastrl.models.policy import UnsupportedActionSpace, mlp


class QNetwork(nn.Module):
    """``Q(s, ·)`` for a Discrete action space; optionally dueling (``V + A - mean(A)``).

    The same module is the workers' inference copy (greedy action; epsilon is the actor's
    business, see fastrl.models.actors) and the learner's online network.
    """

    def __init__(self, obs_space: spaces.Space, act_space: spaces.Space, hidden: list[int],
                 dueling: bool = False, body: nn.Module | None = None,
                 encoder: str = "auto") -> None:
        super().__init__()
        if not isinstance(act_space, spaces.Discrete):
            raise UnsupportedActionSpace(
                f"DQN acts in a Discrete action space, not {act_space}; use algo.name=sac "
                "for Box actions"
            )
        # a user's body reads flat features (fastrl.models.base's contract)
        self._features = obs_features(obs_space) if body is not None else \
            make_encoder(obs_space, encoder)
        self._act_start = int(act_space.start)
        self.legal_actions = action_mask(obs_space, act_space)
        self.num_actions = int(act_space.n)
        self.dueling = dueling
        n_out = self.num_actions + (1 if dueling else 0)
        # body: features [B, obs_size] -> [B, n_out]; a user's plain module (models.base)
        self.net = body if body is not None else \
            mlp(self._features.size, hidden, n_out, 1.0, nn.ReLU)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values ``[..., num_actions]`` of a batch of observations; -inf for actions
        their action mask forbids, so that neither the greedy action nor a target's max
        takes one (fastrl.models.masks)."""
        out = self.net(self._features(obs))
        if self.dueling:
            value, adv = out[..., :1], out[..., 1:]
            out = value + adv - adv.mean(-1, keepdim=True)
        legal = self.legal_actions
        return out if legal is None else mask_logits(out, legal(obs))

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True):
        """``(greedy action, zeros, max Q)``: the rollout/evaluation interface of
        :class:`~fastrl.models.policy.ActorCritic` (a Q-network has no log-probability)."""
        q = self(obs)
        value, action = q.max(-1)
        return action + self._act_start, torch.zeros_like(value), value

    def action_index(self, action: torch.Tensor) -> torch.Tensor:
        """Stored actions (``Discrete.start`` based) as column indices of ``forward``."""
        return action.long() - self._act_start
