"""Population runs through processes (fastrl.population): exact members that are their
single runs bit for bit; batched ones that repeat bit for bit and stay near them."""

from __future__ import annotations

import csv

import pytest
import torch
from helpers import TINY, run_dir_of, train_main

from fastrl import Trainer
from fastrl.callbacks import Callback
from fastrl.config import load_config
from fastrl.plan import plan_run

pytestmark = pytest.mark.timeout(240)

RUN = [*TINY, "algo.total_steps=2048", "algo.target_return=null", "log.tensorboard=false",
       "log.eval_every_steps=100000", "log.checkpoint_every_steps=100000"]


def _run(tmp_path, *overrides: str):
    proc = train_main([*RUN, *overrides], tmp_path)
    assert proc.returncode == 0, proc.stderr
    return run_dir_of(tmp_path)


def _episodes(run, group: str | None = None, scale: int = 1) -> list[tuple]:
    with (run / "episodes.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    return [(int(r["step"]) // scale, r["return"], r["length"]) for r in rows
            if group is None or r["group"] == group]


@pytest.mark.parametrize("overrides", [(), ("algo.normalize_obs=true",
                                       "algo.normalize_reward=true"), ("algo.core=lstm",)],
                         ids=["plain", "normalisers", "lstm"])
def test_exact_members_are_their_single_runs(tmp_path, overrides):
    pop = _run(tmp_path / "pop", "population.size=2", "population.exact=true", "seed=5",
               *overrides)
    model = torch.load(pop / "model.pt", weights_only=True)["model"]
    for k in range(2):
        single = _run(tmp_path / f"seed{5 + k}", f"seed={5 + k}", *overrides)
        theirs = torch.load(single / "model.pt", weights_only=True)["model"]
        assert all(torch.equal(model[f"members.{k}.{name}"], t) for name, t in theirs.items())
        mine = _episodes(pop, f"member{k}", scale=2)
        assert mine and mine == _episodes(single)




def test_batched_runs_repeat_and_stay_near_the_exact_one(tmp_path):
    pop = ["population.size=2", "seed=5", "population.vary={algo.lr: [0.001, 0.002]}"]
    first, second = (_run(tmp_path / name, *pop) for name in ("first", "second"))
    exact = _run(tmp_path / "exact", *pop, "population.exact=true")
    models = [torch.load(run / "model.pt", weights_only=True)["model"]
              for run in (first, second, exact)]
    assert all(torch.equal(models[0][name], t) for name, t in models[1].items())
    assert _episodes(first) == _episodes(second)
    assert (first / "members.png").stat().st_size > 0  # (matplotlib: the test extra)
    # (a few updates apart: rounding, not a different algorithm)
    assert all(torch.allclose(models[0][name], t, atol=1e-3) for name, t in models[2].items())


def test_trainer_fit_returns_each_member_s_result(tmp_path):
    cfg = load_config(None, [*RUN, "population.size=2", "log.eval_episodes=2",
                             f"log.run_dir={tmp_path}"])
    result = Trainer(cfg).fit()
    returns = [m["return_mean"] for m in result.members]
    assert len(returns) == 2 and result.eval["worst_return_mean"] == min(returns)
    assert all(m["episodes"] == 2 for m in result.members)


class _Evals(Callback):
    def __init__(self) -> None:
        self.results: list[tuple[int, dict[str, float]]] = []

    def on_eval(self, step, result, *args, **kwargs):
        self.results.append((step, dict(result)))


def test_each_member_is_solved_on_its_own_and_keeps_the_weights_that_solved(tmp_path):
    # (the serial runtime evaluates in the learner, in order: these seeds solve member 1
    # at the first evaluation and member 0 five later)
    cfg = load_config(None, [*TINY, "infra.runtime=serial", "population.size=2",
                             "population.vary={algo.lr: [0.001, 0.01]}",
                             "algo.target_return=200", "algo.total_steps=16384",
                             "log.eval_every_steps=1024", "log.tensorboard=false",
                             f"log.run_dir={tmp_path}"])
    evals = _Evals()
    result = Trainer(cfg, callbacks=[evals]).fit()
    solved = [m["solved_step"] for m in result.members]
    assert all(s in [step for step, _ in evals.results] for s in solved)
    assert solved[1] < solved[0] < 2 * 16384 and result.global_step == solved[0]
    for k in range(2):
        at = dict(evals.results)[solved[k]][f"member{k}/return_mean"]
        assert at >= 200
        before = [r[f"member{k}/return_mean"] for step, r in evals.results if step < solved[k]]
        after = [r[f"member{k}/return_mean"] for step, r in evals.results if step > solved[k]]
        assert all(r < 200 for r in before)
        assert all(r == at for r in after)  # (its weights that solved, evaluated again)
    assert [r["members_solved"] for _, r in evals.results][-1] == 2


def test_an_appo_population_trains_every_member_on_its_rows(tmp_path):
    run = _run(tmp_path, "algo.name=appo", "population.size=2", "algo.total_steps=4096")
    model = torch.load(run / "model.pt", weights_only=True)["model"]
    start = plan_run(load_config(run / "config.yaml", saved=True)).policy().state_dict()
    for k in range(2):
        assert _episodes(run, f"member{k}")  # (every member's envs stepped and reported)
        weight = f"members.{k}.actor.0.weight"
        assert not torch.equal(model[weight], start[weight])  # (and its network trained)
