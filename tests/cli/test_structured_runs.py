"""Dict observations with an action mask, end to end through ``python -m fastrl.train``:
every algorithm trains on them, the actor-critic ones with a recurrent core too, on the
local, serial and Ray runtimes, without a masked action ever reaching the env (PickLegal
raises on one, and the run then fails), evaluates them, and exports them with one named
input per leaf (and a recurrent policy's state in and out)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import QUICK, QUICK_DQN, last_json, train_main

from fastrl.eval.policy import load_policy
from fastrl.export import export_policy, load_artifact, torch_runner
from fastrl.memory.records import ObsRecord
from fastrl.models.base import sample_obs

PICK = ["env.id=scripted_envs:PickLegal-v0", *QUICK, "algo.total_steps=4096",
        "log.run_name=run"]
RUNS = {
    "ppo": [],
    "a2c": ["algo.name=a2c"],
    "appo": ["algo.name=appo"],
    "dqn": [*QUICK_DQN],
    "ppo-torch-actor": ["infra.worker_inference=torch"],
    "ppo-serial": ["infra.runtime=serial"],
    "a2c-gru": ["algo.name=a2c", "algo.core=gru", "algo.core_size=16"],
    # (policy lag: APPO's workers act with weights up to 16 versions old; the learner
    # replays from the states they stored)
    "appo-lstm": ["algo.name=appo", "algo.core=lstm", "algo.core_size=16"],
    "ppo-gru-serial": ["infra.runtime=serial", "algo.core=gru", "algo.core_size=16"],
}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("run", sorted(RUNS))
def test_masked_dict_observations_train_without_an_illegal_action(run, tmp_path,
                                                                   no_shm_residue):
    # (a2c takes one step a batch: no epochs or minibatches to set)
    args = [a for a in PICK if not run.startswith("a2c")
            or not a.startswith(("algo.num_minibatches", "algo.update_epochs"))]
    proc = train_main([*args, *RUNS[run], "log.eval_episodes=20"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = last_json(proc.stdout)
    assert result["global_step"] >= 4096
    # 10-step episodes, 1 reward a step at most. Uniformly random legal play scores 3.97
    # (the target among 1 + Binomial(5, 0.4) legal actions), its mean of 20 episodes
    # within 4 +- 0.35; after these 4096 steps the runs scored 6.2 (appo-lstm) to 10.
    assert result["eval"]["return_mean"] >= 5.0, result["eval"]


@pytest.mark.timeout(300)
def test_masked_dict_observations_on_the_ray_runtime(ray_address, tmp_path, no_shm_residue):
    # On the conftest's Ray, as on a user's cluster: a Ray that fastrl starts for the run is
    # tests/runtime/test_ray.py's, and its shutdown alone takes seconds.
    proc = train_main([*PICK, "infra.runtime=ray", f"infra.ray_address={ray_address}",
                       "algo.core=gru", "algo.core_size=16"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert last_json(proc.stdout)["global_step"] >= 4096


@pytest.mark.timeout(240)
def test_sac_trains_on_a_dict_of_vector_leaves(tmp_path, no_shm_residue):
    proc = train_main(["env.id=scripted_envs:DictPendulum-v0", "algo.name=sac", *QUICK,
                       "algo.total_steps=1024", "algo.replay.learning_starts=512",
                       "algo.replay.batch_size=32", "log.run_name=run"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert last_json(proc.stdout)["global_step"] >= 1024


@pytest.mark.timeout(240)
@pytest.mark.parametrize("core", ["none", "lstm"])
def test_export_takes_one_named_input_per_leaf(core, tmp_path, no_shm_residue):
    sized = ["algo.core_size=8"] if core != "none" else []
    assert train_main([*PICK, f"algo.core={core}", *sized], tmp_path).returncode == 0
    loaded = load_policy(tmp_path / "run")
    done = export_policy(loaded, "onnx", tmp_path / "pick.onnx")
    inputs = {i["name"]: (i["shape"], i["dtype"]) for i in done.metadata["inputs"]}
    outputs = [i["name"] for i in done.metadata["outputs"]]
    state = {"state": (["batch", 16], "float32")} if core == "lstm" else {}
    assert inputs == {"obs.action_mask": (["batch", 6], "int8"),
                      "obs.aux.0": (["batch", 3], "int8"),
                      "obs.aux.1": (["batch", 2], "float64"),
                      "obs.cue": (["batch"], "int64"),
                      "obs.observation": (["batch", 6], "float32"), **state}
    assert outputs == ["action", *(["next_state"] if state else [])]
    sidecar = json.loads(done.sidecar.read_text())
    assert sidecar["observation_space"]["kind"] == "Dict"
    assert (sidecar["state"] or {}).get("size") == (16 if state else None)
    obs = sample_obs(loaded.plan.obs_space, 64).numpy()
    size = done.module.state_size
    artifact = load_artifact(done.artifact, "onnx", loaded.plan.obs_space, state_size=size)
    eager = torch_runner(done.module, loaded.plan.obs_space, size)
    # three steps: a recurrent artifact's states go out and back in, as the eager policy's
    for _ in range(3):
        exported = artifact(obs)
        np.testing.assert_array_equal(exported, eager(obs))
    legal = ObsRecord(loaded.plan.obs_space).views(obs)["action_mask"] != 0
    legal[~legal.any(1)] = True  # (no legal action: every one is)
    assert legal[np.arange(64), exported].all()  # the artifact honours the mask


#: a GRU PPO that learns fastrl/Recall-v0 (4 cues, 6 blank steps) in about 13k steps, 5 s
RECALL = ["env.id=fastrl/Recall-v0", "algo.core=gru", "algo.core_size=32",
          "algo.hidden_sizes=[32]", "algo.lr=2e-3", "algo.total_steps=150000",
          "algo.target_return=0.95", "infra.num_workers=2", "infra.envs_per_worker=8",
          "infra.rollout_len=16", "log.eval_every_steps=4096", "log.eval_episodes=20",
          "log.console=false", "log.run_name=run"]


@pytest.mark.timeout(240)
def test_a_recurrent_policy_recalls_the_cue(tmp_path, no_shm_residue):
    # Without memory the query step looks alike for every cue: 1/4 at best
    # (tests/envs/test_recall.py); with a GRU core the evaluation reaches 0.95.
    proc = train_main(RECALL, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = last_json(proc.stdout)
    assert result["eval"]["return_mean"] >= 0.95, result["eval"]
    assert result["global_step"] < 150_000  # stopped at the target, not the budget
