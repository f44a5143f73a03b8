"""User policies (fastrl.models.base, fastrl.plan.make_policy): the ways to name one, flat
parameters, the built-in policies' contracts; a policy that does not fit its algorithm's
contract is refused when the run is planned, before any process starts, with an error that
names the call, the expected shape and the returned one. (User policies trained through
worker processes: tests/runtime/test_user_policies.py.)"""

from __future__ import annotations

import numpy as np
import psutil
import pytest
import torch
from gymnasium import spaces
from helpers import QUICK, QUICK_DQN
from torch import nn
from user_policies import ActOnly, ColumnValue, TinyActorCritic, ZeroBasedQ, q_net

from fastrl.config import AlgoConfig, load_config
from fastrl.models.base import PolicyContractError, check_policy
from fastrl.models.families import ACTOR_CRITIC
from fastrl.models.policy import flat_params, load_flat_params
from fastrl.plan import make_policy, plan_run
from fastrl.trainer import Trainer

OBS = spaces.Box(-1, 1, (4,))


class ActorCriticNet(nn.Module):
    """A plain module for PPO: ``features -> (head, value [B, 1])``."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.head, self.critic = nn.Linear(n_in, n_out), nn.Linear(n_in, 1)

    def forward(self, x: torch.Tensor):
        return self.head(x), self.critic(x)




def test_wrong_output_shape_is_refused_before_any_process_starts(tmp_path):
    cfg = load_config(None, [*QUICK, *QUICK_DQN, f"log.run_dir={tmp_path}"])
    trainer = Trainer(cfg, policy=q_net(3))
    children = psutil.Process().children(recursive=True)
    with pytest.raises(PolicyContractError, match=(
            r"policy Sequential for algo.name=dqn: forward\(obs\) must return Q-values of "
            r"shape \[B, 2\] for Discrete\(2\); it returned \[B, 3\]")):
        _ = trainer.plan
    assert psutil.Process().children(recursive=True) == children
    assert not list(tmp_path.iterdir())


# --- the ways to name a policy ------------------------------------------------------------
def test_import_string_in_the_config_names_the_class():
    cfg = load_config(None, ["algo.policy=user_policies:TinyActorCritic"])
    assert isinstance(plan_run(cfg).policy(), TinyActorCritic)
    for ref, message in (("user_policies:Missing", "cannot import it"),
                         ("torch.nn:Linear", "not a fastrl.BasePolicy subclass")):
        cfg = load_config(None, [f"algo.policy={ref}"])
        with pytest.raises(PolicyContractError, match=message):
            plan_run(cfg)


@pytest.mark.parametrize("spec, message", [
    (nn.Linear, r"pass Linear\(\.\.\.\)"),
    (42, "expected a fastrl.BasePolicy subclass"),
    (nn.ReLU(), "has no parameters"),
])
def test_what_is_not_a_policy_is_named(spec, message):
    with pytest.raises(PolicyContractError, match=message):
        make_policy(AlgoConfig(), OBS, spaces.Discrete(2), spec)


@pytest.mark.parametrize("algo, act_space, spec", [
    ("ppo", spaces.Discrete(2), TinyActorCritic),
    ("ppo", spaces.Box(-1, 1, (2,)), ActorCriticNet(4, 2)),
    ("dqn", spaces.Discrete(3, start=-1), q_net(3)),
    ("sac", spaces.Box(-2, 2, (2,)), q_net(4)),
])
def test_flat_params_round_trip_between_two_constructions(algo, act_space, spec):
    a, b = (make_policy(AlgoConfig(name=algo), OBS, act_space, spec) for _ in range(2))
    assert [n for n, _ in a.named_parameters()] == [n for n, _ in b.named_parameters()]
    load_flat_params(b, flat_params(a))
    assert np.array_equal(flat_params(b), flat_params(a))
    with torch.no_grad():
        next(a.parameters()).add_(1.0)  # each construction owns its parameters
    assert not np.array_equal(flat_params(b), flat_params(a))


# --- the contracts ------------------------------------------------------------------------
@pytest.mark.parametrize("algo, act_space", [
    ("ppo", spaces.Discrete(2)), ("ppo", spaces.Box(-1, 1, (2,))), ("none", spaces.Discrete(2)),
    ("dqn", spaces.Discrete(3, start=1)), ("sac", spaces.Box(-2, 2, (1,))),
])
def test_built_in_policies_fit_their_contracts(algo, act_space):
    check_policy(make_policy(AlgoConfig(name=algo), OBS, act_space),
                 AlgoConfig(name=algo).algorithm.policy, algo, OBS, act_space)


@pytest.mark.parametrize("algo, act_space, spec, message", [
    ("ppo", spaces.Discrete(2), ColumnValue,
     r"policy ColumnValue for algo.name=ppo: act\(obs, deterministic=False\) must return "
     r"value of shape \[B\] for Discrete\(2\); it returned \[B, 1\]"),
    ("ppo", spaces.Discrete(2), ActOnly, r"has no method value\(obs\)"),
    ("dqn", spaces.Discrete(2, start=5), ZeroBasedQ,
     r"act\(obs, deterministic=False\) must return integer actions in 5\.\.6"),
    ("dqn", spaces.Box(-1, 1, (2,)), q_net(2), "dqn acts in Discrete action spaces"),
    ("ppo", spaces.Discrete(2), q_net(2),
     r"forward\(obs\) must return \(logits \[B, 2\], value \[B\] or \[B, 1\]\) for "
     r"Discrete\(2\); it returned \[B, 2\]"),
    ("ppo", spaces.Box(-1, 1, (3,)), ActorCriticNet(4, 2),
     r"\(action mean \[B, 3\], value \[B\] or \[B, 1\]\).*it returned \(\[B, 2\], \[B, 1\]\)"),
    ("sac", spaces.Box(-1, 1, (2,)), q_net(2),
     r"forward\(obs\) must return \(mean, log_std\) concatenated of shape \[B, 4\]"),
    ("dqn", spaces.Discrete(2), nn.Linear(5, 2), r"forward\(obs\) raised RuntimeError"),
])
def test_contract_mismatch_names_call_expected_and_returned(algo, act_space, spec, message):
    with pytest.raises(PolicyContractError, match=message):
        make_policy(AlgoConfig(name=algo), OBS, act_space, spec)


def test_acting_policies_fit_where_only_acting_is_asked():
    make_policy(AlgoConfig(name="none"), OBS, spaces.Discrete(2), ActOnly)
    make_policy(AlgoConfig(name="dqn"), OBS, spaces.Discrete(2), ZeroBasedQ)


def test_act_runs_without_gradients_and_evaluate_with_them():
    policy = make_policy(AlgoConfig(), OBS, spaces.Discrete(2), TinyActorCritic)
    obs = torch.zeros(3, 4)
    assert not any(t.requires_grad for t in policy.act(obs))
    assert all(t.requires_grad for t in policy.evaluate(obs, torch.tensor([0, 1, 1])))


def test_checks_leave_the_global_rng_and_the_modules_alone():
    policy = TinyActorCritic(OBS, spaces.Discrete(2), AlgoConfig())
    state = torch.get_rng_state()
    check_policy(policy, ACTOR_CRITIC, "ppo", OBS, spaces.Discrete(2))
    assert torch.equal(torch.get_rng_state(), state)
    module = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    module[2].eval()  # a mixed mode survives too
    before = {k: v.clone() for k, v in module.state_dict().items()}
    make_policy(AlgoConfig(name="dqn"), OBS, spaces.Discrete(2), module)
    after = module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before), "running stats moved"
    assert [m.training for m in module] == [True, True, False]


def test_plain_modules_get_one_hot_features_of_discrete_observations():
    policy = make_policy(AlgoConfig(name="dqn"), spaces.Discrete(5), spaces.Discrete(2),
                         nn.Linear(5, 2))
    action, _, value = policy.act(torch.tensor([0, 4, 2]))
    assert action.shape == value.shape == (3,)
