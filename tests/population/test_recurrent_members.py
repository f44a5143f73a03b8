"""A population of recurrent members (algo.core): a worker's actor keeps each member's
envs' core states on that member's rows of the slot, and carries them over a park."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fastrl.bench.learner import synthetic_slot
from fastrl.config import load_config
from fastrl.plan import plan_run
from fastrl.population.actor import PopulationActor

pytestmark = pytest.mark.timeout(120)


def _actor(plan, policy) -> PopulationActor:
    algorithm = plan.cfg.algo.algorithm
    actors = [algorithm.make_actor(policy.member(k), plan.act_space, 10 + k, "numpy")
              for k in range(plan.population.size)]
    return PopulationActor(policy, actors, policy.streams, plan.population.rows,
                           stacked=False)


def test_each_member_keeps_its_envs_core_states_on_its_rows():
    plan = plan_run(load_config(None, ["population.size=2", "algo.core=gru",
                                       "infra.envs_per_worker=4"]))
    policy = plan.policy()
    actor, rows = _actor(plan, policy), plan.population.rows
    slot = plan.layout.views(memoryview(bytearray(plan.layout.nbytes)), 0)  # (a ring's)
    obs = synthetic_slot(plan)["obs"][0]
    for _ in range(3):  # (states away from zero)
        actor(obs)
    actor.begin_slot(slot, 0, 0)
    for k, member in enumerate(actor.actors):
        np.testing.assert_array_equal(slot["core_state"][k * rows:(k + 1) * rows],
                                      member.core.numpy())
    assert np.abs(slot["core_state"]).min() > 0
    ended = np.zeros(2 * rows, bool)
    ended[rows + 1] = True  # member 1's second env
    actor.end_step(ended, np.zeros_like(ended), None)
    assert not actor.actors[1].core[1].any() and actor.actors[1].core[0].all()
    assert actor.actors[0].core.all()

    parked = actor.state()
    again = _actor(plan, policy)
    again.restore(parked)
    for a, b in zip(actor(obs), again(obs)):  # (the same states and streams: the same acts)
        np.testing.assert_array_equal(a, b)
    assert all(torch.equal(a.core, b.core) for a, b in zip(actor.actors, again.actors))
