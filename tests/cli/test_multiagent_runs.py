"""Multi-agent envs end to end through ``python -m fastrl.train``: a PettingZoo Parallel env
whose agents come and go (scripted_envs.Relay) trains with one shared policy on the local,
serial and Ray runtimes, with a recurrent core too, and with one network per agent group
where the groups see different spaces; an id naming a PettingZoo module (MPE2's
simple_spread) runs; the reports carry each agent group's episodes."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import QUICK, last_json, tb, train_main

from fastrl.eval.policy import load_policy
from fastrl.export import export_policy, load_artifact, torch_runner
from fastrl.models.base import sample_obs

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
def test_agents_that_come_and_go_share_one_policy_that_learns(run, request, tmp_path,
                                                              no_shm_residue):
    args = [a for a in RELAY if run != "a2c" or not a.startswith(("algo.num_minibatches",
                                                                     "algo.update_epochs"))]
    if run == "ray":  # on the conftest's Ray (a Ray started for the run: tests/runtime)
        args.append(f"infra.ray_address={request.getfixturevalue('ray_address')}")
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


@pytest.mark.timeout(240)
def test_one_network_per_agent_group_learns_groups_that_see_different_spaces(
        tmp_path, no_shm_residue):
    # the chaser's group sees a wider observation than the runners' and gets a network of
    # its own; each group learns to play 1
    proc = train_main([*RELAY, "env.kwargs={breaks: chaser_sees_more}",
                       "algo.policy_per_group=true"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert last_json(proc.stdout)["eval"]["return_mean"] > 5.5
    assert tb(tmp_path / "run", "episode/chaser/return_mean")[-1][1] > 6
    # exported, the artifact routes each row to its group's network as the policy does
    loaded = load_policy(tmp_path / "run")
    done = export_policy(loaded, "onnx", tmp_path / "groups.onnx")
    assert {i["name"] for i in done.metadata["inputs"]} == {
        "obs.group", "obs.by_group.runner", "obs.by_group.chaser"}
    obs = sample_obs(loaded.plan.obs_space, 64).numpy()
    artifact = load_artifact(done.artifact, "onnx", loaded.plan.obs_space)
    np.testing.assert_array_equal(artifact(obs), torch_runner(done.module,
                                                              loaded.plan.obs_space)(obs))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("per_group", [False, True])
def test_groups_of_different_action_counts_never_take_another_group_s_action(
        per_group, tmp_path, no_shm_residue):
    # the chaser has a third action the runners lack (Relay raises on one), masked for them
    proc = train_main([*RELAY, "env.kwargs={breaks: chaser_acts_more}",
                       f"algo.policy_per_group={str(per_group).lower()}"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert last_json(proc.stdout)["eval"]["return_mean"] > 5.5


@pytest.mark.parametrize("overrides, says", [
    (["env.fn=''", "env.id=mpe2.simple_spread_v3", "env.kwargs={max_cycles: 25}"],
     "needs a PettingZoo env of several agent groups"),
    (["algo.core=gru"], "builds one feed-forward built-in network per agent group"),
])
def test_policy_per_group_where_it_cannot_apply_is_refused_in_one_line(overrides, says,
                                                                        tmp_path):
    proc = train_main([*RELAY, "algo.policy_per_group=true", *overrides], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert says in proc.stderr and "Traceback" not in proc.stderr
