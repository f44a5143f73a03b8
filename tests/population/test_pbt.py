"""Population-based training (fastrl.population.pbt): each round's ranking, copies and
perturbations, what a copy carries over in both updates, and its lineage."""

from __future__ import annotations

import csv

import pytest
import torch

from fastrl.bench.learner import synthetic_batch
from fastrl.config import load_config
from fastrl.learner.reward_scale import ReturnScale
from fastrl.plan import plan_run
from fastrl.population.config import PBTConfig, value_of
from fastrl.population.pbt import PBT
from fastrl.population.update import BatchedUpdate, PopulationUpdate

pytestmark = pytest.mark.timeout(240)

LRS = [1e-3, 2e-3, 3e-3, 4e-3]
PBT_RUN = ["population.size=4", "population.pbt.every_steps=100",
           f"population.vary={{algo.lr: {LRS}, algo.ent_coef: [0.0, 0.01, 0.02, 0.03]}}"]


def _episodes(returns: list[float]) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
    """A batch in which member ``k`` (column ``k``) ends one episode of ``returns[k]``."""
    n = len(returns)
    batch = {"terminated": torch.ones(1, n, dtype=torch.bool),
             "truncated": torch.zeros(1, n, dtype=torch.bool),
             "episode_return": torch.tensor([returns], dtype=torch.float32)}
    return batch, [torch.tensor([k]) for k in range(n)]


def test_the_bottom_copy_the_top_and_perturb_their_settings(tmp_path):
    cfg = load_config(None, PBT_RUN)
    configs = [c.algo for c in plan_run(cfg).population.configs]
    pbt = PBT(PBTConfig(every_steps=100, fraction=0.5, perturb=[0.5, 2.0]), 4,
              ["algo.lr", "algo.ent_coef"], seed=7, run_dir=str(tmp_path))
    pbt.observe(*_episodes([10.0, 40.0, 30.0, 20.0]))
    assert pbt.round(99, configs) == []  # (not due yet)
    copies = pbt.round(100, configs)
    assert sorted(c.member for c in copies) == [0, 3]  # the two lowest returns...
    for c in copies:
        assert c.source in (1, 2)  # ...copy one of the two highest
        assert c.fitness < c.source_fitness
        for key in ("algo.lr", "algo.ent_coef"):
            assert c.settings[key] / value_of(configs[c.source], key) in (0.5, 2.0)
    again = PBT(pbt.cfg, 4, pbt.keys, seed=7, run_dir=None)
    again.observe(*_episodes([10.0, 40.0, 30.0, 20.0]))
    assert again.round(100, configs) == copies  # (a seeded draw: the same lineage)
    with (tmp_path / "members.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["member"]), int(r["source"])) for r in rows] == \
        [(c.member, c.source) for c in copies]
    assert pbt.round(150, configs) == []  # (next round at 200; no episode since: -inf)


def test_a_perturbed_setting_stays_within_its_key_s_bounds():
    configs = [c.algo for c in plan_run(load_config(None, [
        "population.size=2", "population.vary={algo.gamma: [0.99, 0.995], "
        "algo.gae_lambda: [0.9, 0.95]}"])).population.configs]
    pbt = PBT(PBTConfig(every_steps=100, fraction=0.5, perturb=[1.25]), 2,
              ["algo.gamma", "algo.gae_lambda"], seed=7, run_dir=None)
    pbt.observe(*_episodes([10.0, 40.0]))
    (copy,) = pbt.round(100, configs)
    assert copy.settings == {"algo.gamma": 1.0, "algo.gae_lambda": 1.0}  # (not 1.24, 1.19)


def test_a_solved_member_copies_no_one(tmp_path):
    configs = [c.algo for c in plan_run(load_config(None, PBT_RUN)).population.configs]
    pbt = PBT(PBTConfig(every_steps=100, fraction=0.5), 4, ["algo.lr"], seed=7, run_dir=None)
    pbt.observe(*_episodes([10.0, 40.0, 30.0, 20.0]))
    copies = pbt.round(100, configs, frozen={0})
    assert sorted(c.member for c in copies) == [2, 3]  # (member 0 is solved: the next two)


@pytest.mark.parametrize("exact", ["false", "true"])
def test_a_copied_member_takes_its_source_s_weights_optimizer_and_settings(exact):
    plan = plan_run(load_config(None, [*PBT_RUN, f"population.exact={exact}",
                                       "population.pbt.fraction=0.25"]))
    policy = plan.policy()
    update = plan.make_update(policy, torch.device("cpu"))
    assert type(update) is (PopulationUpdate if exact == "true" else BatchedUpdate)
    batch = synthetic_batch(plan, 2)
    update.update(batch, 0.0, 0)  # (trains: every member has moments of its own)
    pbt = update.pbt = PBT(update.pbt.cfg, 4, update.pbt.keys, seed=1, run_dir=None)
    pbt.observe(*_episodes([5.0, 1.0, 9.0, 7.0]))  # (the batch's episodes left out)
    pbt.next_round = 0  # member 1 the worst, 2 the best
    update._pbt_round({k: v[:, :0] for k, v in batch.items()}, [], 0)  # (due, no episode)
    (copy,) = update.pbt.lineage
    assert (copy.member, copy.source) == (1, 2)
    for a, b in zip(policy.member(1).parameters(), policy.member(2).parameters()):
        assert torch.equal(a, b)
    assert update.updates[1].cfg.lr == copy.settings["algo.lr"] != LRS[1]
    state = update.state_dict()
    if exact == "true":
        moments = [s["optimizer"]["state"] for s in state["members"]]
        assert all(torch.equal(moments[1][i]["exp_avg"], moments[2][i]["exp_avg"])
                   for i in moments[1])
    else:
        assert torch.equal(state["adam"]["exp_avg"][1], state["adam"]["exp_avg"][2])
    restored = plan.make_update(plan.policy(), torch.device("cpu"))
    restored.load_state_dict(state)
    assert restored.updates[1].cfg.lr == copy.settings["algo.lr"]  # (the lineage replayed)
    assert restored.pbt.lineage == update.pbt.lineage


def test_a_copied_member_takes_its_source_s_reward_statistics_and_discount():
    plan = plan_run(load_config(None, [
        "population.size=4", "population.pbt.every_steps=100", "population.pbt.fraction=0.25",
        "algo.normalize_reward=true", "population.vary={algo.gamma: [0.9, 0.95, 0.98, 0.99]}"]))
    update = plan.make_update(plan.policy(), torch.device("cpu"))
    scale = ReturnScale(plan.cfg.total_envs, *plan.return_groups())
    update.bind_reward_scale(scale)
    for g, stats in enumerate(scale.stats):  # (statistics of each member's own)
        stats.update(torch.full((5, 1), float(g + 1)) * torch.arange(5.0)[:, None])
    update.pbt = PBT(update.pbt.cfg, 4, update.pbt.keys, seed=1, run_dir=None)
    update.pbt.observe(*_episodes([5.0, 1.0, 9.0, 7.0]))
    update.pbt.next_round = 0  # member 1 the worst, 2 the best
    no_episodes = {"terminated": torch.zeros(1, 0, dtype=torch.bool),
                   "truncated": torch.zeros(1, 0, dtype=torch.bool)}
    update._pbt_round(no_episodes, [], 0)
    (copy,) = update.pbt.lineage
    assert (copy.member, copy.source) == (1, 2)
    assert torch.equal(scale.stats[1].var, scale.stats[2].var)
    assert not torch.equal(scale.stats[0].var, scale.stats[2].var)
    assert scale.gammas[1] == copy.settings["algo.gamma"] != 0.95
    restored = plan.make_update(plan.policy(), torch.device("cpu"))
    again = ReturnScale(plan.cfg.total_envs, *plan.return_groups())
    restored.bind_reward_scale(again)
    restored.load_state_dict(update.state_dict())
    assert again.gammas[1] == copy.settings["algo.gamma"]  # (the lineage replayed)
