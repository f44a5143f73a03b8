"""One network per agent group (fastrl.models.grouped): each row is acted for, evaluated and
valued by its group's network, told by its record's group leaf, and trains only it."""

from __future__ import annotations

import numpy as np
import torch
from scripted_envs import Relay
from torch import nn

from fastrl.config import AlgoConfig
from fastrl.envs.source import EnvSource
from fastrl.models.families import build_actor_critic
from fastrl.models.grouped import GroupedActorCritic, has_groups

RUNNER, CHASER = 0, 1


def relay_rows():
    """The observation space of Relay (runners and a chaser that sees more), and the
    records of one env's rows after the chaser joined: runner, runner, chaser."""
    envs = EnvSource("relay", {"breaks": "chaser_sees_more"}, env_fn=Relay).make([0])
    envs.reset()
    out = envs.step(np.ones(3, np.int64))
    return envs.observation_space, envs.action_space, torch.from_numpy(out[0].copy())


def test_each_row_is_acted_for_by_its_group_s_network():
    obs_space, act_space, obs = relay_rows()
    assert has_groups(obs_space)
    policy = GroupedActorCritic(obs_space, act_space, [8])
    assert policy.groups(obs).tolist() == [RUNNER, RUNNER, CHASER]
    with torch.no_grad():  # runners always play 1, the chaser 0
        policy.nets[RUNNER].actor[-1].bias.copy_(torch.tensor([-50.0, 50.0]))
        policy.nets[CHASER].actor[-1].bias.copy_(torch.tensor([50.0, -50.0]))
    batch = obs.repeat(4, 1).view(2, 6, -1)  # any leading dimensions
    actions, log_prob, value = policy.act(batch, deterministic=True)
    assert actions.shape == (2, 6) and actions[0].tolist() == [1, 1, 0] * 2
    # evaluate and value are the group network's own, row by row
    logp, _, v = policy.evaluate(obs, torch.tensor([1, 0, 0]))
    for row, g in enumerate([RUNNER, RUNNER, CHASER]):
        own = policy.nets[g].evaluate(obs[row:row + 1], torch.tensor([[1, 0, 0][row]]))
        assert torch.allclose(logp[row], own[0][0]) and torch.allclose(v[row], own[2][0])
    assert torch.allclose(policy.value(obs), v)


def test_a_group_s_rows_train_only_its_network():
    obs_space, act_space, obs = relay_rows()
    policy = GroupedActorCritic(obs_space, act_space, [8])
    logp, _, value = policy.evaluate(obs[:2], torch.tensor([1, 0]))  # the runners' rows
    (value.sum() - logp.sum()).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0
               for p in policy.nets[RUNNER].parameters() if p.dim() > 1)
    assert all(p.grad is None or not p.grad.any() for p in policy.nets[CHASER].parameters())


def test_the_built_in_network_s_settings_reach_every_group_s_network():
    obs_space, act_space, _ = relay_rows()
    policy = build_actor_critic(obs_space, act_space, AlgoConfig(
        policy_per_group=True, hidden_sizes=[8], activation="relu", ortho_init=False))
    for net in policy.nets:
        assert nn.ReLU in {type(m) for m in net.actor} and net.actor[0].bias.any()
