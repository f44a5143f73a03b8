"""Self-play end to end through ``python -m fastrl.train``: PPO learns the built-in Duel by
playing past versions of itself until it beats the scripted baseline in 90% of evaluation
games; the serial runtime plays too, and the Ray runtime trains to the local runtime's
weights; what self-play cannot run, or resume, is refused in one line."""

from __future__ import annotations

import pytest
from helpers import QUICK, last_json, same_weights, tb, train_main

DUEL = ["env.id=fastrl/Duel-v0", "selfplay.enabled=true", "log.console=false",
        "algo.target_return=null", "log.run_name=run"]


@pytest.mark.timeout(300)
def test_self_play_beats_the_scripted_baseline_in_nine_games_of_ten(tmp_path, no_shm_residue):
    # (seeds 1-5 won 0.96-0.98 at these 131,072 steps, 0.91-0.97 at the evaluation half way
    # and 0.99 after 500k; a fresh policy wins none)
    proc = train_main([*DUEL, "infra.num_workers=2", "infra.envs_per_worker=32",
                       "algo.total_steps=131072", "log.eval_every_steps=65536",
                       "log.eval_episodes=100"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = last_json(proc.stdout)
    assert result["eval"]["episodes"] == 100
    assert result["eval"]["win_rate"] >= 0.9, result["eval"]
    # the learner's games against the pool are logged as they are played
    assert tb(tmp_path / "run", "selfplay/win_rate")
    assert tb(tmp_path / "run", "eval/win_rate")[-1][1] == pytest.approx(result["eval"]["win_rate"])


SMALL = [*DUEL, *QUICK, "infra.num_workers=2", "algo.total_steps=4096", "seed=3",
         "selfplay.snapshot_every=2", "selfplay.pool_size=2", "selfplay.latest_prob=0.2"]


@pytest.mark.timeout(240)
def test_self_play_on_the_serial_runtime_learns_to_beat_the_baseline(tmp_path):
    # A fresh policy wins none of its games against the scripted baseline (0.0 in 100, as
    # after SMALL's 4096 steps); after 65,536 steps seeds 1-4 won 0.89-0.94 of them.
    proc = train_main([*DUEL, "infra.runtime=serial", "infra.num_workers=2",
                       "infra.envs_per_worker=32", "algo.total_steps=65536",
                       "log.eval_episodes=100"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert last_json(proc.stdout)["eval"]["win_rate"] >= 0.6


@pytest.mark.timeout(300)
def test_self_play_on_ray_trains_to_the_local_runtime_s_weights(ray_address, tmp_path,
                                                              no_shm_residue):
    # fixed seed, deterministic slots and opponents: the relay sends each actor the
    # snapshots its slots draw, and the weights come out bit for bit the local run's (on
    # the conftest's Ray; a Ray started for the run: tests/runtime/test_ray.py)
    args = [*SMALL, "infra.max_policy_lag=0"]
    assert train_main(args, tmp_path / "local").returncode == 0
    proc = train_main([*args, "infra.runtime=ray", f"infra.ray_address={ray_address}"],
                      tmp_path / "ray")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert same_weights(tmp_path / "local" / "run", tmp_path / "ray" / "run")


@pytest.mark.parametrize("overrides, says", [
    (["algo.name=dqn"], "'selfplay.enabled=true' trains algo.name=a2c, appo or ppo"),
    (["algo.core=gru"], "takes a feed-forward policy"),
    (["env.id=CartPole-v1"], "needs a two-player game; env 'CartPole-v1' has one agent"),
    (["env.fn=scripted_envs:Relay", "infra.envs_per_worker=6"], "has 3 agents"),
    (["selfplay.baseline=no_such_module:Bot"], "selfplay.baseline='no_such_module:Bot'"),
])
def test_what_self_play_cannot_run_is_refused_in_one_line(overrides, says, tmp_path):
    proc = train_main([*DUEL, *QUICK, *overrides], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert says in proc.stderr and "Traceback" not in proc.stderr


def test_self_play_keys_without_self_play_are_refused(tmp_path):
    proc = train_main([*QUICK, "selfplay.pool_size=3"], tmp_path)
    assert proc.returncode == 2
    assert "only applies with selfplay.enabled=true" in proc.stderr


def test_a_resume_that_reshapes_the_pool_is_refused_in_one_line(tmp_path):
    args = [*DUEL, *QUICK, "algo.total_steps=1024", "selfplay.snapshot_every=2"]
    assert train_main(args, tmp_path).returncode == 0
    run = tmp_path / "run"
    for change, says in (("selfplay.snapshot_every=3", "selfplay.snapshot_every: 2 -> 3"),
                         ("selfplay.pool_size=4", "selfplay.pool_size: 8 -> 4")):
        proc = train_main(["--resume", str(run), change, "algo.total_steps=2048"], tmp_path)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "its self-play pool does not fit the config" in proc.stderr
        assert says in proc.stderr and "Traceback" not in proc.stderr
