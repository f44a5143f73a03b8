"""Algorithms: losses and update rules only (the learner feeds them batches)."""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from fastrl.algos.appo import APPO
from fastrl.algos.dqn import DQN
from fastrl.algos.ppo import PPO
from fastrl.algos.sac import SAC
from fastrl.config import AlgoConfig
from fastrl.models.sac import TwinQ


def make_algo(cfg: AlgoConfig, policy: nn.Module, obs_space: gym.Space, act_space: gym.Space,
              device: torch.device) -> PPO | APPO | DQN | SAC:
    """The algorithm ``cfg.name`` training ``policy`` (already on ``device``); SAC's critics
    are made here, since workers never need them."""
    if cfg.name == "dqn":
        return DQN(policy, cfg)
    if cfg.name == "sac":
        return SAC(policy, TwinQ(obs_space, act_space, cfg.hidden_sizes).to(device), cfg)
    if cfg.name == "appo":
        return APPO(policy, cfg)
    return PPO(policy, cfg)
