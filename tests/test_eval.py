"""The evaluation harness (fastrl.eval.harness, python -m fastrl.eval) on checkpoints of a
tiny real CartPole PPO run: its numbers are those of a direct ``evaluate`` call, repeat
exactly, continue each seed's env across episodes, and compare checkpoints on one suite;
bad paths and incompatible checkpoints are refused in one line."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import shutil
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import TINY

from fastrl import Trainer
from fastrl.checkpoint import MANIFEST, checkpoints_dir
from fastrl.config import load_config
from fastrl.envs.source import EnvSource
from fastrl.eval.checkpoints import (
    checkpoint_report,
    evaluate_checkpoint_to,
    evaluate_checkpoints,
    evaluate_loaded,
)
from fastrl.eval.cli import main
from fastrl.eval.harness import EvalError, SeedSuite, evaluate, evaluate_episodes
from fastrl.eval.policy import load_policy
from fastrl.memory.segments import leftover_segments
from fastrl.models.policy import ActorCritic
from fastrl.runtime.supervisor import checkpoint_eval_summary

pytestmark = pytest.mark.timeout(300)

FLAT_KEYS = {"episodes", "return_mean", "return_std", "return_min", "return_max",
             "length_mean", "length_std", "length_min", "length_max"}
CARTPOLE = EnvSource("CartPole-v1")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished run with checkpoints at steps 512, 1024 and 1536 (one worker: fewer
    processes to start on a 2-core machine)."""
    tmp = tmp_path_factory.mktemp("eval")
    result = Trainer(load_config(None, [
        *TINY, "infra.num_workers=1", "algo.total_steps=1536", "algo.target_return=null",
        "log.checkpoint_every_steps=512", f"log.run_dir={tmp}"])).fit()
    # This process supervised the run: its segments carry our pid (others' runs may be
    # going on beside this test, so /dev/shm as a whole is no measure).
    assert not leftover_segments(f"{os.getpid()}_"), "the run left shared memory behind"
    return result.run_dir


@pytest.fixture(autouse=True)
def one_torch_thread():
    """One torch thread, as python -m fastrl.eval uses: a forward of a few observations on
    two threads waits for a busy core (10x slower on a loaded 2-core machine). Later tests
    get their thread count back."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def folders(run) -> list:
    return sorted(p for p in checkpoints_dir(run).iterdir() if not p.name.startswith("."))


def seed_stats(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k in FLAT_KEYS}


def test_results_match_a_direct_evaluate_call(run):
    report = evaluate_checkpoints([run], {"num_seeds": 3, "episodes_per_seed": 2})
    (result,) = report["checkpoints"]
    assert result["checkpoint"] == str(folders(run)[-1]) and result["global_step"] == 1536
    policy = load_policy(run).policy
    seeds = [10_000, 10_001, 10_002]  # log.eval_seed of the run's config, 3 seeds
    assert result["summary"] == evaluate(policy, CARTPOLE, seeds, episodes_per_seed=2)
    assert [e["seed"] for e in result["per_seed"]] == seeds
    for entry in result["per_seed"]:
        alone = evaluate_episodes(policy, CARTPOLE, [entry["seed"]], episodes_per_seed=2)
        assert seed_stats(entry) == alone.summary()
        assert entry["returns"] == alone.returns[0].tolist()
        assert entry["lengths"] == alone.lengths[0].tolist()


def test_results_repeat_exactly(run):
    overrides = {"num_seeds": 4, "episodes_per_seed": 2}
    assert evaluate_checkpoints([run], overrides) == evaluate_checkpoints([run], overrides)


def play_by_hand(policy, seed: int, episodes: int) -> tuple[list[float], list[np.ndarray]]:
    """Returns and first observations of a seed's episodes, resetting unseeded in between."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    returns, starts = [], []
    for _ in range(episodes):
        starts.append(obs)
        total, done = 0.0, False
        while not done:
            action, _, _ = policy.act(torch.as_tensor(obs[None]), deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(int(action[0]))
            total += reward
            done = terminated or truncated
        returns.append(total)
        obs, _ = env.reset()
    env.close()
    return returns, starts


def test_later_episodes_of_a_seed_continue_its_env(run):
    policy = load_policy(run).policy
    episodes = evaluate_episodes(policy, CARTPOLE, [10_000, 10_001], episodes_per_seed=3)
    assert episodes.returns.shape == episodes.lengths.shape == (2, 3)
    for row, seed in enumerate([10_000, 10_001]):
        returns, starts = play_by_hand(policy, seed, 3)
        assert not np.array_equal(starts[0], starts[1]), "episode 1 replayed the seed"
        assert episodes.returns[row].tolist() == returns
        assert episodes.lengths[row].tolist() == returns  # CartPole: reward 1 per step
    first = evaluate_episodes(policy, CARTPOLE, [10_000, 10_001])
    assert first.returns[:, 0].tolist() == episodes.returns[:, 0].tolist()


def test_cut_episodes_count_and_the_next_one_continues():
    source = EnvSource("scripted_envs:Count-v0")  # never terminates
    probe = source.make([0])
    policy = ActorCritic(probe.observation_space, probe.action_space, [8])
    probe.close()
    episodes = evaluate_episodes(policy, source, [0, 1], max_steps=7, episodes_per_seed=3)
    assert episodes.lengths.tolist() == [[7, 7, 7]] * 2
    assert episodes.summary()["episodes"] == 6.0


def test_json_schema(run, tmp_path, capsys):
    out = tmp_path / "sub" / "eval.json"
    assert main([str(run), "--seeds", "2", "--episodes-per-seed", "2", "--json",
                 "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    assert printed.keys() == {"env_id", "suite", "device", "checkpoint", "global_step", "algo",
                              "summary", "per_seed"}
    assert printed["env_id"] == "CartPole-v1" and printed["device"] == "cpu"
    assert printed["suite"] == {"first_seed": 10_000, "num_seeds": 2, "episodes_per_seed": 2,
                                "max_steps": 100_000}
    assert printed["checkpoint"] == str(folders(run)[-1]) and printed["algo"] == "ppo"
    assert printed["summary"].keys() == FLAT_KEYS
    assert all(type(v) is float for v in printed["summary"].values())
    assert printed["summary"]["episodes"] == 4.0
    for entry in printed["per_seed"]:
        assert entry.keys() == FLAT_KEYS | {"seed", "returns", "lengths"}
        assert len(entry["returns"]) == len(entry["lengths"]) == 2
        assert entry["return_mean"] == pytest.approx(np.mean(entry["returns"]))


def test_compares_checkpoints_on_one_suite(run, capsys):
    old, new = folders(run)[0], folders(run)[-1]
    assert main([str(old), str(new), "--seeds", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report.keys() == {"env_id", "suite", "device", "checkpoints"}
    assert [r["global_step"] for r in report["checkpoints"]] == [512, 1536]
    for path, result in zip((old, new), report["checkpoints"]):
        alone = checkpoint_report(evaluate_checkpoints([path], {"num_seeds": 3}))
        assert alone["suite"] == report["suite"]
        assert result == {key: alone[key] for key in result}
    assert main([str(old), str(new), "--seeds", "3"]) == 0
    table = capsys.readouterr().out
    assert all(s in table for s in (old.name, new.name, "512", "1,536", "return mean"))


def test_refuses_checkpoints_of_another_env(run, tmp_path, capsys):
    other = tmp_path / folders(run)[-1].name
    shutil.copytree(folders(run)[-1], other)
    manifest = json.loads((other / MANIFEST).read_text())
    (other / MANIFEST).write_text(json.dumps({**manifest, "env_id": "Acrobot-v1"}))
    assert main([str(run), str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fastrl.eval: error: cannot compare")
    assert "'Acrobot-v1'" in err and "'CartPole-v1'" in err


def test_refuses_a_corrupt_checkpoint_and_a_bad_suite(run, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(folders(run)[-1], broken)
    with (broken / "learner.pt").open("r+b") as f:
        f.truncate(100)
    assert main([str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"fastrl.eval: error: {broken}: learner.pt")
    assert "truncated" in err
    assert main([str(run), "--seeds", "0"]) == 2
    assert "--seeds" in capsys.readouterr().err


def test_refuses_observation_normalisation_it_cannot_apply(run):
    loaded = dataclasses.replace(load_policy(run), normalizer={"mean": [0.0] * 4})
    with pytest.raises(EvalError, match="normalisation"):
        evaluate_loaded(loaded, CARTPOLE, SeedSuite(0, 1))


def test_cli_exit_status_and_message_on_a_bad_path(tmp_path):
    missing = tmp_path / "missing"
    proc = subprocess.run([sys.executable, "-m", "fastrl.eval", str(missing)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"fastrl.eval: error: {missing} does not exist\n"


def test_evaluate_checkpoint_to_in_a_spawned_process(run, tmp_path):
    checkpoint, out = folders(run)[0], tmp_path / "evals" / "a.json"
    proc = multiprocessing.get_context("spawn").Process(
        target=evaluate_checkpoint_to, args=(str(checkpoint), str(out)))
    proc.start()
    try:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    finally:
        proc.kill()
        proc.join(timeout=10)
    assert [p.name for p in out.parent.iterdir()] == ["a.json"]  # no temporary left
    written = json.loads(out.read_text())
    assert written == checkpoint_report(evaluate_checkpoints([checkpoint]))
    assert written["global_step"] == 512 and written["summary"]["episodes"] == 2.0
    assert written["suite"]["num_seeds"] == 2  # the run's log.eval_episodes (TINY)
    # what the supervisor logs of it (fastrl.runtime.supervisor, log.eval_on_checkpoint)
    assert checkpoint_eval_summary(written) == written["summary"]
