"""Which features combine: one table of the feature pairs fastrl refuses, and why.

Each :class:`Pair` names a feature, what it cannot be combined with, and the one-line
:class:`~fastrl.core.errors.ConfigError` a run that combines them gets. The features are
those that cut across the pipeline: the algorithm (its data mode and policy family), a
recurrent core, the built-in actor-critic's own settings, a multi-agent env, self-play, one
network per agent group, the observation and reward normalisers, random actions and a user's
policy (:class:`Features`).

Most pairs are decided from the config alone (:func:`check_config_pairs`, called by
fastrl.config.check_values); the pairs that depend on the env's agents, or on a policy
given to fastrl.Trainer besides the config, are decided once the env has been made to read
its spaces (:func:`check_env_pairs`, called by fastrl.plan).
docs/config.md renders the table (:func:`table_rows`). A new feature that cannot combine
with another adds a row here, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastrl.algos.base import Algorithm, DataMode, changed_from_default
from fastrl.algos.registry import ALGORITHMS
from fastrl.core.errors import ConfigError
from fastrl.models.families import ACTOR_CRITIC_KEYS
from fastrl.models.recurrent import NO_CORE


def algorithm_names(which: Callable[[Algorithm], bool]) -> str:
    """``algo.name=ppo, appo or a2c``: the algorithms ``which(algorithm)`` holds for."""
    names = [a.name for a in ALGORITHMS.values() if which(a)]
    return "algo.name=" + (", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1
                           else names[0])


def _actor_critic(a: Algorithm) -> bool:
    return a.policy.name == "actor-critic"


def _trains_on_policy(a: Algorithm) -> bool:
    return a.trains and a.data.on_policy


@dataclass(frozen=True)
class Features:
    """What a run combines. ``user_policy`` is the user's policy as the config names it
    (``algo.policy``; empty for the built-in network); ``network``, the keys of
    fastrl.models.families.ACTOR_CRITIC_KEYS set to other than their defaults; ``env_id``,
    ``agents`` (a multi-agent env's possible agents, () for one agent; None before the env
    is made), ``groups`` and ``groups_in_rows`` (its rows tell agent groups apart) are known
    once the env is made, and so is ``trainer_policy`` (a policy given to fastrl.Trainer)."""

    algorithm: Algorithm
    core: str = NO_CORE
    user_policy: str = ""
    normalize_obs: bool = False
    normalize_reward: bool = False
    random_actions: bool = False
    policy_per_group: bool = False
    selfplay: bool = False
    population: int = 1
    runtime: str = "local"
    network: tuple[str, ...] = ()
    pbt: bool = False
    policy_lag: int = 0
    env_id: str = ""
    agents: tuple[str, ...] | None = None
    groups: int = 0
    groups_in_rows: bool = False
    trainer_policy: bool = False

    @classmethod
    def of(cls, cfg: Any, **env: Any) -> Features:
        """The features of a run's config (fastrl.config.MainConfig), and of its env where
        ``env`` gives them (``env_id``, ``agents``, ``groups``, ``groups_in_rows``,
        ``trainer_policy``)."""
        algo = cfg.algo
        return cls(algo.algorithm, algo.core, algo.policy, algo.normalize_obs,
                   algo.normalize_reward, algo.random_actions, algo.policy_per_group,
                   cfg.selfplay.enabled, cfg.population.size, cfg.infra.runtime,
                   tuple(changed_from_default(algo, ACTOR_CRITIC_KEYS)),
                   pbt=bool(cfg.population.pbt.every_steps), policy_lag=cfg.policy_lag_bound,
                   **env)

    def given(self) -> str:
        """The algorithm as the config gives it, with its user policy."""
        return f"algo.name={self.algorithm.name}" + (
            f" with algo.policy={self.user_policy}" if self.user_policy else "")

    def not_the_built_in_actor_critic(self) -> bool:
        """The run trains a user policy, or another policy family than the actor-critic."""
        return bool(self.user_policy) or not _actor_critic(self.algorithm)

    def per_group_conflicts(self) -> list[str]:
        """What one built-in network per agent group cannot be built with."""
        given = [f"algo.name={self.algorithm.name}"] \
            if not _actor_critic(self.algorithm) else []
        given += [f"algo.policy={self.user_policy}"] if self.user_policy else []
        given += [f"algo.core={self.core}"] if self.core != NO_CORE else []
        given += ["algo.normalize_obs=true"] if self.normalize_obs else []
        return given

    def population_conflicts(self) -> list[str]:
        """What a population cannot be trained with (yet: docs/population.md)."""
        if self.population == 1:
            return []
        given = [f"algo.name={self.algorithm.name}"] if not (
            _trains_on_policy(self.algorithm)
            and self.algorithm.data in (DataMode.SYNC, DataMode.ASYNC)) else []
        given += [f"algo.policy={self.user_policy}"] if self.user_policy else []
        given += [f"{key}=true" for key, on in (
            ("algo.policy_per_group", self.policy_per_group),
            ("selfplay.enabled", self.selfplay)) if on]
        given += [f"infra.runtime={self.runtime}"] if self.runtime == "ray" else []
        return given

    def agents_text(self) -> str:
        """The env's agents, as a refusal words them."""
        agents = self.agents or ()
        return f"{len(agents)} agents ({', '.join(agents)})" if agents else "one agent"


#: The built-in actor-critic's own settings, as the table words them.
NETWORK_KEYS = "algo." + "|".join(ACTOR_CRITIC_KEYS)


@dataclass(frozen=True)
class Pair:
    """One row of the table: ``feature`` does not combine with ``other`` (both in words,
    for docs/config.md); ``refused(features)`` tells a run that combines them, and
    ``message(features)`` is its one-line error. ``env``: decided once the env is made."""

    feature: str
    other: str
    refused: Callable[[Features], bool]
    message: Callable[[Features], str]
    env: bool = False


PAIRS = (
    Pair("algo.random_actions=true", "an algorithm that trains",
         lambda f: f.random_actions and f.algorithm.trains,
         lambda f: f"config key 'algo.random_actions=true' needs "
                   f"{algorithm_names(lambda a: not a.trains)} (nothing can learn from random "
                   "actions)"),
    Pair("algo.normalize_obs=true", "a user policy, or another network than the actor-critic",
         lambda f: f.normalize_obs and f.not_the_built_in_actor_critic(),
         lambda f: "config key 'algo.normalize_obs=true' needs the built-in network "
                   f"(algo.policy empty) of {algorithm_names(_actor_critic)}, not "
                   f"{f.given()}"),
    Pair("algo.core=lstm|gru", "a user policy, or another network than the actor-critic",
         lambda f: f.core != NO_CORE and f.not_the_built_in_actor_critic(),
         lambda f: f"config key 'algo.core={f.core}' is a part of the built-in network "
                   f"(algo.policy empty) of {algorithm_names(_actor_critic)}, not of "
                   f"{f.given()}"),
    Pair(f"{NETWORK_KEYS} changed",
         "a user policy, or another network than the actor-critic",
         lambda f: bool(f.network) and f.not_the_built_in_actor_critic(),
         lambda f: f"config key 'algo.{f.network[0]}' sets the built-in network (algo.policy "
                   f"empty) of {algorithm_names(_actor_critic)}, not {f.given()}: leave it "
                   "at its default"),
    Pair("algo.policy_per_group=true",
         "another algorithm than the actor-critics', a user policy, algo.core, "
         "algo.normalize_obs",
         lambda f: f.policy_per_group and bool(f.per_group_conflicts()),
         lambda f: "config key 'algo.policy_per_group=true' builds one feed-forward built-in "
                   f"network per agent group, for {algorithm_names(_actor_critic)} with "
                   "algo.core=none, no algo.policy and no algo.normalize_obs; not with "
                   + ", ".join(f.per_group_conflicts())),
    Pair("algo.normalize_reward=true", "an off-policy algorithm",
         lambda f: f.normalize_reward and not f.algorithm.data.on_policy,
         lambda f: "config key 'algo.normalize_reward=true' scales the batches of "
                   f"{algorithm_names(_trains_on_policy)}, not algo.name={f.algorithm.name}'s"),
    Pair("selfplay.enabled=true", "an algorithm that does not train on-policy",
         lambda f: f.selfplay and not _trains_on_policy(f.algorithm),
         lambda f: "config key 'selfplay.enabled=true' trains "
                   f"{algorithm_names(_trains_on_policy)}, not algo.name={f.algorithm.name}"),
    Pair("selfplay.enabled=true", "algo.core=lstm|gru",
         lambda f: f.selfplay and f.core != NO_CORE,
         lambda f: "config key 'selfplay.enabled=true' takes a feed-forward policy; "
                   f"algo.core={f.core} is not supported with it yet"),
    Pair("population.size > 1",
         "another algorithm than ppo, a2c and appo, a user policy, "
         "algo.policy_per_group, self-play, infra.runtime=ray",
         lambda f: bool(f.population_conflicts()),
         lambda f: f"config key 'population.size={f.population}' trains the built-in network "
                   "of algo.name=ppo, a2c or appo, one agent each, on the local or serial "
                   "runtime (docs/population.md); not with "
                   + ", ".join(f.population_conflicts())),
    Pair("population.pbt.every_steps > 0",
         "an algorithm that is not sync (appo), infra.max_policy_lag > 0",
         lambda f: f.pbt and (f.algorithm.data is not DataMode.SYNC or f.policy_lag > 0),
         lambda f: "config key 'population.pbt.every_steps' needs a sync algorithm without "
                   "policy lag (ppo or a2c, infra.max_policy_lag=0), so that no slot "
                   "collected under a copied member's old weights is in flight; not "
                   + (f.given() if f.algorithm.data is not DataMode.SYNC else
                      f"infra.max_policy_lag={f.policy_lag}")),
    Pair("population.size > 1", "a multi-agent env, or a policy given to fastrl.Trainer",
         lambda f: f.population > 1 and (bool(f.agents) or f.trainer_policy),
         lambda f: f"config key 'population.size={f.population}' trains the built-in network "
                   "on envs of one agent; " + (
                       "not a policy given to fastrl.Trainer" if f.trainer_policy else
                       f"env {f.env_id!r} has {f.agents_text()}"),
         env=True),
    Pair("a multi-agent env", "a replay algorithm",
         lambda f: bool(f.agents) and f.algorithm.data is DataMode.REPLAY,
         lambda f: f"env {f.env_id!r} has {len(f.agents)} agents: multi-agent envs train "
                   f"with the on-policy algorithms ({algorithm_names(_trains_on_policy)}), "
                   f"not algo.name={f.algorithm.name}",
         env=True),
    Pair("algo.core=lstm|gru", "a policy given to fastrl.Trainer",
         lambda f: f.trainer_policy and f.core != NO_CORE,
         lambda f: f"config key 'algo.core={f.core}' is a part of the built-in network; a "
                   "user policy is trained as it is: leave it at none",
         env=True),
    Pair(f"{NETWORK_KEYS} changed", "a policy given to fastrl.Trainer",
         lambda f: f.trainer_policy and bool(f.network),
         lambda f: f"config key 'algo.{f.network[0]}' sets the built-in network; a user "
                   "policy is trained as it is: leave it at its default",
         env=True),
    Pair("algo.policy_per_group=true", "a policy given to fastrl.Trainer",
         lambda f: f.trainer_policy and f.policy_per_group,
         lambda f: "config key 'algo.policy_per_group=true' builds the built-in network per "
                   "agent group; a user policy is trained as it is: leave it false",
         env=True),
    Pair("selfplay.enabled=true", "an env of other than two agents",
         lambda f: f.selfplay and len(f.agents) != 2,
         lambda f: "config key 'selfplay.enabled=true' needs a two-player game; env "
                   f"{f.env_id!r} has {f.agents_text()}",
         env=True),
    Pair("algo.policy_per_group=true", "an env without several agent groups in its rows",
         lambda f: f.policy_per_group and (f.groups < 2 or not f.groups_in_rows),
         lambda f: "config key 'algo.policy_per_group=true' needs a PettingZoo env of "
                   "several agent groups (agent_0, adversary_0, ...); env "
                   f"{f.env_id!r} has " + (
                       f"one group of agents ({', '.join(f.agents)})" if f.groups == 1 else
                       "rows without agent groups" if f.agents else "one agent"),
         env=True),
)


def _check(features: Features, env: bool) -> None:
    for pair in PAIRS:
        if pair.env == env and pair.refused(features):
            raise ConfigError(pair.message(features))


def check_config_pairs(cfg: Any) -> None:
    """Refuse the first pair of the table the config combines (those decided without the
    env)."""
    _check(Features.of(cfg), env=False)


def check_env_pairs(cfg: Any, env_id: str, agents: tuple[str, ...], groups: int,
                    groups_in_rows: bool, trainer_policy: bool = False) -> None:
    """Refuse the first pair of the table the run combines that the config alone could not
    tell: its env's agents are known now, and ``trainer_policy`` says whether a policy was
    given to fastrl.Trainer besides the config."""
    _check(Features.of(cfg, env_id=env_id, agents=agents, groups=groups,
                       groups_in_rows=groups_in_rows, trainer_policy=trainer_policy), env=True)


def table_rows() -> list[tuple[str, str]]:
    """``(feature, what it does not combine with)`` of every row, for docs/config.md."""
    return [(p.feature, p.other) for p in PAIRS]
