"""Population configs (fastrl.population): each member's config, what a population refuses,
each member's columns of a batch."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from fastrl.config import ConfigError, load_config
from fastrl.describe import describe, render
from fastrl.eval.harness import population_summary
from fastrl.memory import segments
from fastrl.memory.segments import SharedMemoryFull
from fastrl.plan import plan_run
from fastrl.population.members import population_of
from fastrl.population.policy import member_results, members_summary

pytestmark = pytest.mark.timeout(240)

def test_a_member_varies_what_population_vary_names():
    cfg = load_config(None, ["population.size=3", "population.vary={algo.lr: [1e-3, 2e-3, "
                                                   "3e-3], algo.gamma: [0.9, 0.95, 0.99]}"])
    members = population_of(cfg).configs
    assert [m.seed for m in members] == [cfg.seed, cfg.seed + 1, cfg.seed + 2]
    assert [(m.algo.lr, m.algo.gamma) for m in members] == \
        [(1e-3, 0.9), (2e-3, 0.95), (3e-3, 0.99)]
    assert all(m.population.size == 1 for m in members)


@pytest.mark.parametrize("overrides, says", [
    (["population.size=2", "algo.name=dqn"], "not with algo.name=dqn"),
    (["population.size=2", "infra.runtime=ray"], "not with infra.runtime=ray"),
    (["population.size=2", "population.vary={algo.lr: [0.001]}"],
     "has 1 values; population.size=2 needs one per member"),
    (["population.size=2", "population.vary={algo.update_epochs: [1, 2]}"],
     "names 'algo.update_epochs'; it varies float keys of algo: "),
    (["population.size=2", "population.vary={algo.lr: [0.001, -1]}"],
     "population member 1 (population.vary's value 1): config key 'algo.lr=-1.0': must be > 0"),
])
def test_what_a_population_refuses(overrides, says):
    with pytest.raises(ConfigError, match=None) as e:
        load_config(None, overrides)
    assert says in str(e.value)


def test_each_member_takes_its_columns_of_a_batch_in_its_single_runs_order():
    pop = population_of(load_config(None, ["population.size=3", "infra.envs_per_worker=2"]))
    # two slots of 3 members x 2 rows: member 1 has columns 2, 3 of each slot
    assert pop.columns(1, 2).tolist() == [2, 3, 8, 9]
    # the member of each run-wide row (env_id) of two workers, as the report reads it
    groups = pop.row_groups()
    assert [groups[row % len(groups)] for row in range(12)] == \
        ["member0", "member0", "member1", "member1", "member2", "member2"] * 2


def test_a_population_too_large_for_dev_shm_names_the_most_members_that_fit(monkeypatch):
    def plan_of(size: int):
        return plan_run(load_config(None, [f"population.size={size}"]))

    room = sum(plan_of(5).shm_bytes().values())  # /dev/shm with room for 5 members, not 6
    st = SimpleNamespace(f_frsize=1, f_blocks=room, f_bavail=room)
    monkeypatch.setattr(segments.os, "statvfs", lambda path: st)
    with pytest.raises(SharedMemoryFull, match=r"reduce population.size \(at most 5 members "
                                               r"fit now\), infra.ring_slots"):
        plan_of(8).check_shared_memory()
    plan_of(5).check_shared_memory()  # (the figure fits)
    with pytest.raises(SharedMemoryFull):
        plan_of(6).check_shared_memory()


@pytest.mark.parametrize("exact, acting, update", [
    ("false", "with one stacked forward", "all at once"),
    ("true", "one member after another", "one after another (population.exact"),
])
def test_describe_shows_the_members_how_they_are_computed_and_their_memory(exact, acting,
                                                                           update):
    plan = plan_run(load_config(None, ["population.size=3", f"population.exact={exact}",
                                       "population.vary={algo.lr: [1e-3, 2e-3, 3e-3]}"]))
    report = describe(plan)
    part = report["rollout"]["population"]
    assert json.loads(json.dumps(part)) == part  # (--json prints it)
    assert part["seeds"] == [1, 2, 3] and part["params_per_member"] * 3 == plan.num_params
    assert part["shm_bytes_per_member"] * 3 <= sum(plan.shm_bytes().values())
    text = " ".join(render(report).replace("│", " ").split())  # (the box's lines, joined)
    assert "population: 3 members (seeds 1..3; algo.lr: [0.001, 0.002, 0.003]); member k " \
           "owns rows [4k, 4k+4)" in text
    assert f"workers act for them {acting}; the learner updates them {update}" in text
    assert part["pbt"] is None and "PBT" not in text
    pbt = describe(plan_run(load_config(None, ["population.size=3", "population.vary={algo.lr: "
                                               "[1e-3, 2e-3, 3e-3]}",
                                               "population.pbt.every_steps=5000"])))
    assert "PBT every 5,000 member steps: the bottom 25% copy the top 25%, perturbing " \
           "algo.lr by [0.8, 1.25]" in " ".join(render(pbt).replace("│", " ").split())


def test_member_results_undo_members_summary():
    members = [{"return_mean": 10.0, "episodes": 2.0}, {"return_mean": 30.0, "episodes": 2.0},
               {"return_mean": 20.0, "episodes": 2.0}]
    summary = members_summary(members)
    assert member_results(summary) == members
    assert (summary["worst_return_mean"], summary["median_return_mean"],
            summary["best_return_mean"]) == (10.0, 20.0, 30.0)
    assert member_results({"return_mean": 1.0, "group/x": 2.0}) == []  # (one policy)


def test_an_evaluation_of_members_holds_their_iqm_with_bootstrap_intervals():
    returns = [10.0, 200.0, 30.0, 40.0, 500.0, 60.0, 70.0, 80.0]
    results = [{"return_mean": r, "episodes": 2.0} for r in returns]
    summary = population_summary(results)
    assert summary["iqm_return"] == pytest.approx(np.mean(sorted(returns)[2:6]))
    for name in ("iqm_return", "return_mean"):
        assert summary[f"{name}_ci_low"] < summary[name] < summary[f"{name}_ci_high"]
    assert summary["return_mean_ci_high"] <= max(returns)
    assert population_summary(results) == summary  # (a fixed bootstrap seed)
