"""Policy families: what an algorithm asks of the network it trains.

A family names the built-in network, how a user's plain module is wrapped into one, the
calls of the policy contract that the learner makes (:mod:`fastrl.models.base` documents
them) and the action spaces it acts in. An algorithm (:mod:`fastrl.algos`) declares its
family; everything that builds or checks a policy asks the family, never the algorithm's
name.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
from gymnasium import spaces
from torch import nn

from fastrl.models.base import (
    ModuleActorCritic,
    PolicyFamily,
    check_actor_critic_calls,
    check_actor_critic_output,
    check_q_network_calls,
    check_squashed_gaussian_calls,
)
from fastrl.models.grouped import GroupedActorCritic
from fastrl.models.policy import ActorCritic
from fastrl.models.qnet import QNetwork
from fastrl.models.recurrent import NO_CORE, RecurrentActorCritic
from fastrl.models.sac import SquashedGaussianActor

#: The ``algo`` keys that only the built-in actor-critic reads, as keywords of its networks
#: (fastrl.compat refuses them with any other network)
ACTOR_CRITIC_KEYS = ("activation", "ortho_init", "log_std_init")


def build_actor_critic(obs: gym.Space, act: gym.Space, algo: Any) -> nn.Module:
    """The built-in actor-critic of the ``algo`` config section: recurrent with a core, one
    per agent group with ``policy_per_group``."""
    heads = {key: getattr(algo, key) for key in ACTOR_CRITIC_KEYS}
    if algo.policy_per_group:
        return GroupedActorCritic(obs, act, algo.hidden_sizes, algo.encoder, algo.normalize_obs,
                                  **heads)
    if algo.core == NO_CORE:
        return ActorCritic(obs, act, algo.hidden_sizes, algo.encoder, algo.normalize_obs,
                           **heads)
    return RecurrentActorCritic(obs, act, algo.hidden_sizes, algo.encoder, algo.normalize_obs,
                                algo.core, algo.core_size, algo.shared_core, **heads)


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
    build=lambda obs, act, algo: build_actor_critic(obs, act, algo),
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
