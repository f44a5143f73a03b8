"""Multi-agent envs end to end through ``python -m fastrl.train``: a PettingZoo Parallel env
whose agents come and go (scripted_envs.Relay) trains with one shared policy on the local,
serial and Ray runtimes, with a recurrent core too, and an id naming a PettingZoo module
(MPE2's simple_spread) runs; the reports carry each agent group's episodes."""

from __future__ import annotations

import pytest
from helpers import QUICK, last_json, tb, train_main

# Relay: an agent's return is (1 + its index) per step it plays action 1; always playing 1
# gives a mean of 7 per agent over an episode, uniform random actions 3.5
RELAY = ["env.fn=scripted_envs:Relay", *QUICK, "infra.envs_per_worker=6",
         "algo.total_steps=6144", "log.run_name=run", "algo.lr=3e-3"]
RUNS = {
    "local": [],
    "serial": ["infra.runtime=serial"],
    "ray": ["infra.runtime=ray"],
    "local-gru": ["algo.core=gru", "algo.core_size=8"],
    "a2c": ["algo.name=a2c"],
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("run", sorted(RUNS))
def test_agents_that_come_and_go_share_one_policy_that_learns(run, tmp_path, no_shm_residue):
    args = [a for a in RELAY if run != "a2c" or not a.startswith(("algo.num_minibatches",
                                                                     "algo.update_epochs"))]
    proc = train_main([*args, *RUNS[run]], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = last_json(proc.stdout)
    assert result["global_step"] >= 6144
    assert result["eval"]["return_mean"] > 5.5, result["eval"]
    # the chaser earns 3 a step it plays 1, a runner 1 or 2
    chaser = tb(tmp_path / "run", "episode/chaser/return_mean")
    assert chaser and tb(tmp_path / "run", "episode/runner/return_mean")
    assert chaser[-1][1] > 6


@pytest.mark.timeout(240)
def test_an_id_naming_a_pettingzoo_module_trains(tmp_path, no_shm_residue):
    proc = train_main(["env.id=mpe2.simple_spread_v3", "env.kwargs={max_cycles: 25}", *QUICK,
                       "infra.envs_per_worker=3", "algo.total_steps=1536",
                       "log.run_name=run"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert last_json(proc.stdout)["eval"]["length_mean"] == 25


def test_rows_that_do_not_divide_into_agents_are_refused_in_one_line(tmp_path):
    proc = train_main([*RELAY, "infra.envs_per_worker=4"], tmp_path)
    assert proc.returncode == 2
    assert "has 3 agents" in proc.stderr and "multiple of 3" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_replay_algorithm_on_a_multi_agent_env_is_refused_in_one_line(tmp_path):
    proc = train_main([*RELAY, "algo.name=dqn", "algo.replay.learning_starts=256",
                       "algo.num_minibatches=4", "algo.update_epochs=4"], tmp_path)
    assert proc.returncode == 2
    assert "multi-agent envs train with the on-policy algorithms" in proc.stderr
