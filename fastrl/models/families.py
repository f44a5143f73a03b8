"""Policy families: what an algorithm asks of the network it trains.

A family names the built-in network, how a user's plain module is wrapped into one, the
calls of the policy contract that the learner makes (:mod:`fastrl.models.base` documents
them) and the action spaces it acts in. An algorithm (:mod:`fastrl.algos`) declares its
family; everything that builds or checks a policy asks the family, never the algorithm's
name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import torch
from gymnasium import spaces
from torch import nn

from fastrl.models.base import (
    ModuleActorCritic,
    check_actor_critic_calls,
    check_actor_critic_output,
    check_q_network_calls,
    check_squashed_gaussian_calls,
)
from fastrl.models.policy import ActorCritic
from fastrl.models.qnet import QNetwork
from fastrl.models.sac import SquashedGaussianActor

if TYPE_CHECKING:
    from fastrl.config import AlgoConfig


@dataclass(frozen=True)
class PolicyFamily:
    """The network side of an algorithm (see the module documentation)."""

    name: str
    #: the built-in network: ``build(obs_space, act_space, algo_config)``
    build: Callable[[gym.Space, gym.Space, AlgoConfig], nn.Module]
    #: a user's plain module as this family's policy: ``wrap(module, obs, act, algo_config)``
    wrap: Callable[[nn.Module, gym.Space, gym.Space, AlgoConfig], nn.Module]
    #: the learner's contract calls on a probe batch, given the sampled actions
    check_calls: Callable[[Any, torch.Tensor], None]
    #: a plain module's forward output: ``(probe, out, action outputs, discrete)``
    check_module_output: Callable[[Any, Any, int, bool], None]
    #: why the family cannot act in an action space ("acts in ..."), or None when it can
    refuse_actions: Callable[[gym.Space], str | None] = lambda space: None
    #: actions must lie within the action space's bounds (a squashed policy)
    bounded_actions: bool = False


def _not_discrete(space: gym.Space) -> str | None:
    if isinstance(space, spaces.Discrete):
        return None
    return f"acts in Discrete action spaces, not {space}"


def _not_bounded_box(space: gym.Space) -> str | None:
    if isinstance(space, spaces.Box) and space.is_bounded("both"):
        return None
    return f"acts in bounded Box action spaces, not {space}"


#: A policy and a value head: ``act``, ``evaluate`` and ``value`` (ppo, appo, a2c).
ACTOR_CRITIC = PolicyFamily(
    name="actor-critic",
    build=lambda obs, act, algo: ActorCritic(obs, act, algo.hidden_sizes, algo.encoder,
                                              algo.normalize_obs),
    wrap=lambda module, obs, act, algo: ModuleActorCritic(module, obs, act, algo),
    check_calls=check_actor_critic_calls,
    check_module_output=check_actor_critic_output,
)

#: The actor-critic network, of which only ``act`` is called (none: collection only).
ACTING_ONLY = dataclasses.replace(ACTOR_CRITIC, name="acting only",
                                  check_calls=lambda probe, action: None)

#: Q-values per discrete action: ``forward`` and ``action_index`` (dqn).
Q_NETWORK = PolicyFamily(
    name="Q-network",
    build=lambda obs, act, algo: QNetwork(obs, act, algo.hidden_sizes, algo.dqn.dueling,
                                          encoder=algo.encoder),
    wrap=lambda module, obs, act, algo: QNetwork(obs, act, [], body=module),
    check_calls=check_q_network_calls,
    check_module_output=lambda probe, out, n, discrete: probe.shape(
        "forward(obs)", "Q-values", out, (n,)),
    refuse_actions=_not_discrete,
)

#: A tanh-squashed Gaussian actor: ``sample`` and ``act_shape`` (sac).
SQUASHED_GAUSSIAN = PolicyFamily(
    name="squashed Gaussian",
    build=lambda obs, act, algo: SquashedGaussianActor(obs, act, algo.hidden_sizes),
    wrap=lambda module, obs, act, algo: SquashedGaussianActor(obs, act, [], body=module),
    check_calls=check_squashed_gaussian_calls,
    check_module_output=lambda probe, out, n, discrete: probe.shape(
        "forward(obs)", "(mean, log_std) concatenated", out, (2 * n,)),
    refuse_actions=_not_bounded_box,
    bounded_actions=True,
)
