"""The members' parameters stacked in one tensor (fastrl.population.stacked): a member
trained there (one member after another, population.exact) is its single run bit for bit,
which needs each parameter to start where a tensor of its own would."""

from __future__ import annotations

import pytest
import torch

from fastrl.algos.base import annealed
from fastrl.bench.learner import synthetic_batch
from fastrl.config import load_config
from fastrl.core.process import learner_torch, seed_everything
from fastrl.plan import plan_run
from fastrl.population.update import member_batch

pytestmark = pytest.mark.timeout(240)


def _single_policy(plan):
    """The policy a single run of ``plan`` starts from (built right after seeding)."""
    seed_everything(plan.cfg.seed)
    return plan.policy()


def test_every_stacked_parameter_starts_on_64_bytes():
    policy = plan_run(load_config(None, ["population.size=3"])).policy()
    assert all(p.data_ptr() % 64 == 0 for p in policy.parameters())
    single = _single_policy(plan_run(load_config(None, ["seed=2"])))  # (member 1: seed 1+1)
    assert all(torch.equal(p, v) for p, v in zip(policy.member(1).parameters(),
                                                 single.parameters(), strict=True))


def test_a_member_trained_in_the_stack_is_its_single_run_bit_for_bit():
    plan = plan_run(load_config("configs/cartpole_ppo.yaml",
                                ["population.size=2", "population.exact=true"]))
    single = plan_run(load_config("configs/cartpole_ppo.yaml", ["seed=2"]))
    with learner_torch(1):
        policy, alone = plan.policy(), _single_policy(single)
        population = plan.make_update(policy, torch.device("cpu"))
        update = single.make_update(alone, torch.device("cpu"))
        algo = plan.population.configs[1].algo
        for i in range(30):
            batch = synthetic_batch(plan, 2, seed=2 * i)
            columns = population._member_columns(batch["reward"].shape[1], torch.device("cpu"))
            mine = member_batch(batch, columns[1])
            population.update(batch, 0.0, 2 * 256 * i)
            update.update(mine, annealed(algo.lr, algo.anneal_lr, 256 * i, algo.total_steps),
                          256 * i)
    assert all(torch.equal(a, b) for a, b in zip(policy.member(1).parameters(),
                                                 alone.parameters(), strict=True))
    assert not torch.equal(next(alone.parameters()), next(single.policy().parameters()))
