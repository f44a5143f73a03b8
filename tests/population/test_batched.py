"""A population computed at once (fastrl.population.stacked, fastrl.population.update's
BatchedUpdate) against one member after another: the same actions, and one update that
differs only by floating-point reduction order."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fastrl.bench.learner import synthetic_batch, synthetic_slot
from fastrl.config import load_config
from fastrl.models.numpy_actor import numpy_actor
from fastrl.models.policy import flat_params
from fastrl.plan import plan_run
from fastrl.population.actor import PopulationActor
from fastrl.population.update import BatchedUpdate, PopulationUpdate

pytestmark = pytest.mark.timeout(240)

PPO_CONFIG = "configs/cartpole_ppo.yaml"
VARIED = ["population.size=3", "algo.num_minibatches=2", "algo.update_epochs=3",
          "algo.max_grad_norm=0.05",  # (every member's gradient clipped: that path too)
          "population.vary={algo.lr: [1e-3, 3e-3, 1e-2], algo.ent_coef: [0.0, 0.01, 0.1], "
          "algo.clip_coef: [0.1, 0.2, 0.3], algo.gamma: [0.9, 0.99, 0.999]}"]


#: Discrete actions, Box ones, and Box ones from standardised observations
ENVS = [[], ["env.id=Pendulum-v1", "algo.target_return=null"],
        ["env.id=Pendulum-v1", "algo.target_return=null", "algo.normalize_obs=true"]]

#: A2C's population (from the defaults: it has no epochs, minibatches or clip)
A2C = ["algo.name=a2c", "population.size=3", "algo.max_grad_norm=0.05",
       "population.vary={algo.lr: [1e-3, 3e-3, 1e-2], algo.ent_coef: [0.0, 0.01, 0.1], "
       "algo.vf_coef: [0.25, 0.5, 1.0], algo.gamma: [0.9, 0.99, 0.999]}"]
UPDATES = [(PPO_CONFIG, VARIED + env) for env in ENVS] + [
    (None, A2C + env) for env in ENVS[:2]] + [(None, ["algo.name=appo", *VARIED])]


def _with_statistics(policy) -> None:
    """Give each member's observation normaliser (where it has one) statistics of its
    own, as training would."""
    for k, member in enumerate(policy.members):
        norm = member._features.norm
        if norm is not None:
            with torch.no_grad():
                norm.mean.copy_(torch.linspace(-1.0, 1.0, len(norm.mean)) * (k + 1))
                norm.var.copy_(torch.full_like(norm.var, 0.5 + k))


def _plan(*overrides: str, varied: list[str] = VARIED, config: str | None = PPO_CONFIG):
    return plan_run(load_config(config, [*varied, *overrides]))


@pytest.mark.parametrize(("config", "overrides"), UPDATES,
                         ids=["ppo", "ppo-box", "ppo-normalized", "a2c", "a2c-box", "appo"])
def test_one_batched_update_is_the_exact_one_up_to_rounding(config, overrides):
    plan = _plan(varied=overrides, config=config)
    exact_policy = plan.policy()
    batched_policy = plan.policy()  # (the same seeds: the same members)
    for policy in (exact_policy, batched_policy):
        _with_statistics(policy)
    device = torch.device("cpu")
    exact = PopulationUpdate(plan.population, exact_policy, [
        plan.cfg.algo.algorithm.make_update(c.algo, exact_policy.member(k), plan.obs_space,
                                            plan.act_space, device)
        for k, c in enumerate(plan.population.configs)],
        [s["torch"] for s in exact_policy.streams])
    batched = plan.make_update(batched_policy, device)
    assert isinstance(batched, BatchedUpdate)
    batch = synthetic_batch(plan, 2)
    for step in (0, 5000):  # (twice: Adam's moments and the minibatch streams carry over)
        theirs = exact.update(batch, 0.0, step)
        mine = batched.update(batch, 0.0, step)
        assert mine.keys() == theirs.keys()
        for name, value in theirs.items():
            torch.testing.assert_close(mine[name], value.float(), rtol=1e-4, atol=1e-5,
                                       msg=name)
    for a, b in zip(batched_policy.parameters(), exact_policy.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert all(torch.equal(a, b) for a, b in zip(batched.streams, exact.streams))
    assert any(not torch.equal(a, b)  # (trained: the comparison is not of two copies)
               for a, b in zip(batched_policy.parameters(), plan.policy().parameters()))


@pytest.mark.parametrize("env", ENVS)
def test_one_stacked_forward_acts_as_each_members_actor(env):
    plan = _plan(*env)
    policy, rows = plan.policy(), plan.population.rows
    _with_statistics(policy)
    actors = [numpy_actor(policy.member(k)) for k in range(plan.population.size)]
    stacked, looped = (PopulationActor(policy, actors, policy.streams, rows, stacked=s)
                       for s in (True, False))
    assert stacked._stacked is not None and looped._stacked is None
    obs = synthetic_slot(plan)["obs"][:4].reshape(-1, *plan.obs_space.shape)
    for rows_obs in (obs[:rows * 3], obs[rows * 3:rows * 6]):
        mine, theirs = stacked(rows_obs), looped(rows_obs)
        np.testing.assert_array_equal(mine[0], theirs[0])  # (the same draws, the same actions)
        np.testing.assert_allclose(mine[1], theirs[1], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(mine[2], theirs[2], rtol=1e-5, atol=1e-6)
    for a, b in zip(stacked.state()["population_streams"], looped.state()["population_streams"]):
        assert a["numpy"][2] == b["numpy"][2]  # (each member's stream as far along)


@pytest.mark.parametrize("overrides", [["population.exact=true"], ["algo.target_kl=0.02"]])
def test_what_the_batched_update_leaves_to_the_member_loop(overrides):
    plan = plan_run(load_config(None, ["population.size=2", *overrides]))
    assert type(plan.make_update(plan.policy(), torch.device("cpu"))) is PopulationUpdate


@pytest.mark.parametrize("exact", [False, True])
def test_a_solved_member_keeps_its_weights(exact):
    plan = _plan("env.id=Pendulum-v1", "algo.target_return=null", "algo.normalize_obs=true",
                 f"population.exact={str(exact).lower()}")
    policy = plan.policy()
    update = plan.make_update(policy, torch.device("cpu"))
    assert isinstance(update, BatchedUpdate) is not exact
    solved = [p.clone() for p in policy.member(1).parameters()]  # (its normaliser too)
    policy.freeze_member(1, None)
    batch = synthetic_batch(plan, 2)
    policy.observe_rows(batch["obs"])
    stats = update.update(batch, 0.0, 0)
    assert all(torch.equal(a, b) for a, b in zip(policy.member(1).parameters(), solved))
    untrained = plan.policy().member(0)
    assert any(not torch.equal(a, b)
               for a, b in zip(policy.member(0).parameters(), untrained.parameters()))
    assert not stats["member0/policy_loss"].isnan()
    assert stats["member1/policy_loss"].isnan()  # (it trained no more)
    trained = torch.stack([stats["member0/policy_loss"], stats["member2/policy_loss"]])
    torch.testing.assert_close(stats["policy_loss"], trained.mean())  # (those trained)


def test_a_solved_member_takes_back_the_weights_that_solved():
    plan = _plan()
    policy, solving = plan.policy(), plan.policy()
    with torch.no_grad():
        for p in solving.parameters():
            p.add_(1.0)
    policy.freeze_member(2, flat_params(solving))
    for k in range(3):
        ours = list(policy.member(k).parameters())
        theirs = list((solving if k == 2 else plan.policy()).member(k).parameters())
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True)), k
    assert policy.frozen == {2}
