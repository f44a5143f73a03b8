"""DQN and SAC through the real workers, rings, supervisor and learner: the asynchronous
engine's metrics and rate limit, replay in checkpoints and resume, a clean stop. (Their
learning bars: tests/e2e/test_solve.py.)"""

from __future__ import annotations

import signal

import numpy as np
import pytest
from helpers import last_json, resume_main, run_dir_of, tb, train_main, wait_training

from fastrl.checkpoint import latest_valid

pytestmark = pytest.mark.timeout(300)

SMALL = ["infra.num_workers=2", "infra.envs_per_worker=2", "infra.rollout_len=16",
         "log.eval_episodes=2", "log.console=false"]
DQN = [*SMALL, "algo.name=dqn", "algo.hidden_sizes=[32,32]", "algo.replay.capacity=4096",
       "algo.replay.batch_size=32", "algo.replay.learning_starts=512",
       "algo.replay.updates_per_step=0.25", "algo.replay.max_ahead_steps=256",
       "algo.target_return=null"]


def test_dqn_with_per_runs_logs_the_engine_and_resumes_with_its_buffer(tmp_path, capfd,
                                                                        no_shm_residue):
    proc = train_main([*DQN, "algo.total_steps=4096", "algo.replay.prioritized=true",
                       "algo.replay.n_step=3", "log.eval_every_steps=2048"], tmp_path, capfd)
    assert proc.returncode == 0, proc.stderr
    assert last_json(proc.stdout)["global_step"] == 4096
    run = run_dir_of(tmp_path)
    for tag in ("replay/fill", "replay/sample_age", "replay/samples_per_insert",
                "train/policy_lag", "loss/q_loss", "episode/return_mean"):
        assert tb(run, tag), f"{tag} was not logged"
    # the update-to-data ratio holds: 32 * 0.25 = 8 samples per transition after the start,
    # within the limiter's error buffer (max_ahead_steps = 256 steps of 4096)
    spi = tb(run, "replay/samples_per_insert")[-1][1]
    assert 8 * (1 - 0.15) <= spi <= 8 * (1 + 0.15), spi
    assert tb(run, "replay/fill")[-1][1] > 0.9  # 4096 steps into a 4096 buffer
    ckpt, _ = latest_valid(run)
    assert ckpt.global_step == 4096 and ckpt.file("replay.npz") is not None
    saved = dict(np.load(ckpt.file("replay.npz")))

    resumed = resume_main(run, ["algo.total_steps=6144"], capfd)
    assert resumed.returncode == 0, resumed.stderr
    assert last_json(resumed.stdout)["global_step"] == 6144
    after, _ = latest_valid(run)
    # the buffer went on from the saved one: its insert counter continued past it
    assert int(np.load(after.file("replay.npz"))["inserted"]) > int(saved["inserted"]) + 1000


def test_sac_stops_cleanly_on_sigterm_with_its_buffer_checkpointed(launch, tmp_path):
    proc = launch([*SMALL, "env.id=Pendulum-v1", "algo.name=sac", "algo.hidden_sizes=[32,32]",
                   "algo.total_steps=1000000", "algo.target_return=null",
                   "algo.replay.learning_starts=256", "algo.replay.batch_size=32",
                   "algo.replay.capacity=100000"], tiny=False)
    wait_training(proc, tmp_path)
    run = run_dir_of(tmp_path)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    stopped = last_json(out)
    ckpt, _ = latest_valid(run)
    assert stopped["stopped_by_signal"] and ckpt.global_step == stopped["global_step"]
    replay = np.load(ckpt.file("replay.npz"))
    assert 0 < int(replay["size"]) <= stopped["global_step"]

