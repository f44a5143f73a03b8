"""One table of the features that do not combine (fastrl.compat): every pair of it refuses a
run that combines its two features, before anything starts, in one line naming both; a run
with either feature alone passes it."""

from __future__ import annotations

import pytest
import scripted_envs  # noqa: F401 - the scripted envs (Relay) for env.fn
import torch
from omegaconf import OmegaConf

from fastrl import config_reference
from fastrl.compat import PAIRS, Features, table_rows
from fastrl.config import ConfigError, MainConfig, load_config
from fastrl.plan import plan_run

RELAY = ["env.fn=scripted_envs:Relay", "infra.envs_per_worker=6"]
DUEL = ["env.id=fastrl/Duel-v0", "selfplay.enabled=true"]
TRAINER_POLICY = "(a policy given to fastrl.Trainer)"
# per row of PAIRS: overrides that combine its two features, and the words of its refusal
COMBINED = [
    (["algo.name=none", "algo.random_actions=true", "algo.name=ppo"], "algo.random_actions"),
    (["algo.name=dqn", "algo.normalize_obs=true"], "needs the built-in network"),
    (["algo.name=sac", "env.id=Pendulum-v1", "algo.core=gru"], "is a part of the built-in"),
    (["algo.name=dqn", "algo.activation=relu"], "'algo.activation' sets the built-in network"),
    (["algo.name=dqn", "algo.policy_per_group=true"], "builds one feed-forward built-in"),
    (["algo.name=sac", "env.id=Pendulum-v1", "algo.normalize_reward=true"],
     "scales the batches of"),
    ([*DUEL, "algo.name=dqn"], "'selfplay.enabled=true' trains algo.name="),
    ([*DUEL, "algo.core=gru"], "takes a feed-forward policy"),
    (["population.size=2", "algo.name=dqn"], "not with algo.name=dqn"),
    (["population.size=2", "algo.name=appo", "population.pbt.every_steps=512",
      "population.vary={algo.lr: [0.001, 0.002]}"],
     "'population.pbt.every_steps' needs a sync algorithm without policy lag"),
    ([*RELAY, "population.size=2"], "trains the built-in network on envs of one agent; env "),
    ([*RELAY, "algo.name=dqn"], "multi-agent envs train with the on-policy"),
    (["algo.core=gru", TRAINER_POLICY], "'algo.core=gru' is a part of the built-in network; "
                                        "a user policy is trained as it is"),
    (["algo.ortho_init=false", TRAINER_POLICY], "'algo.ortho_init' sets the built-in network; "
                                                "a user policy is trained as it is"),
    ([*RELAY, "algo.policy_per_group=true", TRAINER_POLICY],
     "builds the built-in network per agent group; a user policy is trained as it is"),
    (["selfplay.enabled=true"], "needs a two-player game; env 'CartPole-v1' has one agent"),
    (["algo.policy_per_group=true"], "needs a PettingZoo env of several agent groups"),
]


def refusal(overrides: list[str]) -> str | None:
    """The one-line refusal of a run of ``overrides`` (config, then the env's pairs), given
    a policy of its own where they hold TRAINER_POLICY."""
    policy = torch.nn.Linear(4, 2) if TRAINER_POLICY in overrides else None
    try:
        plan_run(load_config(None, [o for o in overrides if o != TRAINER_POLICY]),
                 policy=policy)
    except ConfigError as e:
        return str(e)
    return None


def test_every_pair_has_a_run_that_combines_it():
    assert len(COMBINED) == len(PAIRS)


@pytest.mark.parametrize("i", range(len(PAIRS)), ids=[f"{p.feature} x {p.other}"[:60]
                                                       for p in PAIRS])
def test_a_run_that_combines_a_pair_is_refused_by_it(i):
    overrides, words = COMBINED[i]
    message = refusal(overrides)
    assert message is not None and words in message and "\n" not in message
    if not PAIRS[i].env:  # (the refusal is this row's: its message, word for word)
        assert message == PAIRS[i].message(Features.of(unchecked(overrides)))


def unchecked(overrides: list[str]) -> MainConfig:
    """The config of ``overrides`` as merged, before any check."""
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(MainConfig),
                                               OmegaConf.from_dotlist(overrides)))


def test_each_feature_alone_passes():
    for overrides in (["algo.normalize_obs=true"], ["algo.core=gru"], DUEL, RELAY,
                      ["algo.name=sac", "env.id=Pendulum-v1"],
                      ["env.id=Pendulum-v1", "algo.activation=relu", "algo.ortho_init=false",
                       "algo.log_std_init=-1"],
                      [*RELAY, "algo.policy_per_group=true"]):
        assert refusal(overrides) is None, overrides


def test_the_config_reference_renders_the_table():
    page = config_reference.render()
    rows = page.split("## Features that do not combine")[1].splitlines()
    for feature, other in table_rows():
        feature, other = (x.replace("|", "\\|") for x in (feature, other))
        cell = f"`{feature}`" if "=" in feature else feature
        assert f"| {cell} | {other} |" in rows
