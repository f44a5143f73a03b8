"""The local runtime end to end through processes: results on disk and in TensorBoard,
crashes, hangs and signals, policy lag bounds, and /dev/shm left clean on every path."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time

import pytest
import torch
from helpers import (
    ENDLESS,
    ONE_WORKER,
    TINY,
    all_gone,
    last_json,
    ours_in_shm,
    run_dir_of,
    same_weights,
    shm_left,
    spawned_children,
    tb_accumulator,
    train_main,
    wait_file,
    wait_training,
)

from fastrl.checkpoint import latest_valid
from fastrl.config import load_config
from fastrl.memory.segments import leftover_segments
from fastrl.trainer import Trainer

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """``(summary, run dir)`` of a finished 4096-step run of ``python -m fastrl.train`` (an
    evaluation every 2048 steps); the run left nothing in /dev/shm. Tests read it; none may
    change it."""
    tmp = tmp_path_factory.mktemp("finished")
    before, since = ours_in_shm(), time.time()
    proc = train_main([*TINY, "algo.total_steps=4096", "log.eval_every_steps=2048", "seed=3"],
                      tmp)
    assert proc.returncode == 0, proc.stderr
    assert not shm_left(before, since), "the run left shared memory behind"
    return last_json(proc.stdout), run_dir_of(tmp)


def test_normal_run_writes_results_and_leaves_no_segments(finished):
    summary, run = finished
    assert summary["global_step"] == 4096 and summary["stopped_by_signal"] is False
    assert set(summary["eval"]) == {f"{what}_{stat}" for what in ("return", "length")
                                    for stat in ("mean", "std", "min", "max")} | {"episodes"}
    assert json.loads((run / "result.json").read_text()) == summary
    assert (run / "config.yaml").read_text().count("seed: 3") == 1
    assert len((run / "config_hash").read_text().strip()) == 64
    assert (run / "model.pt").exists()


def test_tensorboard_has_the_documented_scalars(finished):
    acc = tb_accumulator(finished[1])
    tags = set(acc.Tags()["scalars"])
    for tag in ["episode/return_mean", "episode/return_std", "episode/return_min",
                "episode/return_max", "episode/length_mean", "loss/policy_loss",
                "loss/value_loss", "loss/entropy", "loss/approx_kl", "loss/clip_frac",
                "loss/grad_norm", "train/lr", "train/steps_per_sec", "train/policy_lag",
                "train/ring_occupancy", "eval/return_mean"]:
        assert tag in tags, f"missing TensorBoard scalar {tag}"
    steps = [e.step for e in acc.Scalars("loss/policy_loss")]
    assert steps == sorted(set(steps)) and steps[-1] == 4096
    assert all(e.value > 0 for e in acc.Scalars("train/steps_per_sec"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stop_signal_is_a_clean_exit(sig, launch, tmp_path):
    proc = launch(ENDLESS)
    kids = wait_training(proc, tmp_path)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert last_json(out)["stopped_by_signal"] is True
    assert all_gone(kids)
    assert (run_dir_of(tmp_path) / "model.pt").exists()
    # the learner finished its update and checkpointed, with both workers' parked states
    ckpt, skipped = latest_valid(run_dir_of(tmp_path))
    assert not skipped and ckpt.manifest["final"] and ckpt.manifest["worker_states"] == [0, 1]
    assert ckpt.global_step == last_json(out)["global_step"] > 0


def test_sigterm_to_the_whole_process_group_is_a_clean_exit(launch, tmp_path):
    # What `timeout`, systemd or `kill -- -PGID` do: every process gets the signal.
    proc = launch(ENDLESS)
    kids = wait_training(proc, tmp_path)
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert last_json(out)["stopped_by_signal"] is True
    assert all_gone(kids) and (run_dir_of(tmp_path) / "model.pt").exists()


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_second_signal_exits_at_once_without_residue(second, launch, tmp_path):
    # Workers stuck in env.step() cannot stop by themselves: only the second signal ends it.
    # (They hang at step 100: the env contract check before the start steps 64.)
    marker = tmp_path / "stuck"
    proc = launch(["env.id=scripted_envs:Hang-v0", "env.kwargs.hang_at_step=100",
                   f"env.kwargs.hang_marker={marker}", "infra.worker_timeout_s=600", *ENDLESS])
    wait_file(marker, proc)
    kids = spawned_children(proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(1)  # the supervisor is now waiting for the children to stop
    t0 = time.monotonic()
    proc.send_signal(second)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - t0 < 20, "the second signal did not cut the grace period"
    assert "Traceback" not in err
    assert all_gone(kids)


def test_second_signal_ends_a_serial_run_stuck_in_an_env(launch, tmp_path):
    # infra.runtime=serial steps the envs in the main thread: one that hangs never gets back
    # to the stop flag, so the second signal interrupts it there.
    marker = tmp_path / "stuck"
    proc = launch(["infra.runtime=serial", "env.id=scripted_envs:Hang-v0",
                   "env.kwargs.hang_at_step=100", f"env.kwargs.hang_marker={marker}",
                   *ENDLESS])
    wait_file(marker, proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(1)  # the first one only raised the stop flag
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and (tmp_path / "stuck.interrupted").exists()


def test_ctrl_c_to_the_process_group_during_startup_is_a_clean_stop(launch, tmp_path):
    proc = launch(ENDLESS)
    deadline = time.monotonic() + 60
    while not spawned_children(proc) and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal does; children are importing torch
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert last_json(out)["stopped_by_signal"] is True


def test_hung_evaluation_is_reported_and_the_run_ends(tmp_path, no_shm_residue, capfd):
    # The periodic evaluation's env hangs at its step 300 (so do the workers', later: they
    # are given 600 s).
    proc = train_main([*TINY, *ONE_WORKER, "env.id=scripted_envs:Hang-v0",
                       "log.eval_every_steps=64",
                       "infra.learner_timeout_s=3", "infra.worker_timeout_s=600"], tmp_path,
                      capfd)
    assert proc.returncode == 1
    assert re.search(r"the evaluation at step 64: periodic eval \(pid \d+\) has not made "
                     r"progress for \d+ s \(infra.learner_timeout_s=3\)", proc.stderr), proc.stderr


def test_workers_run_ahead_within_max_policy_lag(tmp_path, no_shm_residue):
    # A slow learner (many epochs) and room in the rings: workers must run ahead, by <= 2.
    proc = train_main([*TINY, "algo.total_steps=1024", "infra.max_policy_lag=2",
                       "infra.ring_slots=3", "algo.update_epochs=30"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    lags = [e.value for e in tb_accumulator(run_dir_of(tmp_path)).Scalars("train/policy_lag")]
    assert 1 <= max(lags) <= 2


def test_appo_workers_never_wait_for_weights_and_lag_stays_within_the_bound(tmp_path,
                                                                         no_shm_residue):
    # A slow learner: APPO workers keep collecting with old weights (PPO's would wait), so
    # slots lag; those past the bound are dropped, the rest are trained on. (Deterministic,
    # each slot's weights are fixed within the bound: none is ever dropped.)
    proc = train_main([*TINY, "algo.name=appo", "algo.total_steps=1024",
                       "infra.max_policy_lag=1", "infra.ring_slots=3", "algo.update_epochs=30",
                       "log.metrics_every_s=0", "infra.deterministic=false"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    acc = tb_accumulator(run_dir_of(tmp_path), histograms=0)
    lags = [e.value for e in acc.Scalars("train/policy_lag")]
    assert max(lags) == 1
    assert acc.Scalars("train/dropped_stale_slots")[-1].value > 0
    hist = acc.Histograms("policy_lag/histogram")
    assert hist and max(h.histogram_value.max for h in hist) == 1


def test_too_little_shared_memory_is_refused_before_allocating(tmp_path, no_shm_residue,
                                                               capfd):
    proc = train_main([*TINY, "infra.rollout_len=1000000", "infra.envs_per_worker=100000",
                       "algo.num_minibatches=1"], tmp_path, capfd)
    assert proc.returncode == 2  # bad input, found before any process of the run starts
    assert proc.stderr.startswith("fastrl.train: error: fastrl needs ")
    assert "bytes of shared memory" in proc.stderr and "infra.ring_slots" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_killed_supervisor_leaves_no_orphans_or_segments(launch, tmp_path):
    proc = launch(ENDLESS)
    kids = wait_training(proc, tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    # Children die with it (PDEATHSIG); Python's resource tracker unlinks the segments.
    assert all_gone(kids, timeout=30), "orphaned children kept running"
    deadline = time.monotonic() + 30
    while leftover_segments(f"{proc.pid}_") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not leftover_segments(f"{proc.pid}_")


def test_same_seed_same_weights_and_runs_never_overwrite(tmp_path):
    args = [*TINY, *ONE_WORKER, "algo.total_steps=1024", "seed=5"]
    for _ in range(2):
        proc = train_main(args, tmp_path)
        assert proc.returncode == 0, proc.stderr
    runs = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    assert len(runs) == 2, "the second run reused the first run's directory"
    assert same_weights(*runs), "same seed gave different weights"
    proc = train_main([*args, f"log.run_name={runs[0].name}"], tmp_path)
    assert proc.returncode == 2 and "already exists" in proc.stderr


@pytest.fixture(scope="module")
def from_a_thread(tmp_path_factory):
    """What ``Trainer.fit`` of a continuous-action (Pendulum-v1) run, called from a thread
    that is not the main one, returned and raised: ``(results, errors)``. Tests read it."""
    tmp = tmp_path_factory.mktemp("thread")
    before, since = ours_in_shm(), time.time()
    cfg = load_config(None, [*TINY, "env.id=Pendulum-v1", "algo.total_steps=1024",
                             "algo.target_return=null", f"log.run_dir={tmp}"])
    results, errors = [], []

    def fit():
        try:
            results.append(Trainer(cfg).fit())
        except BaseException as e:  # reported by the tests
            errors.append(e)

    thread = threading.Thread(target=fit)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "fit() did not return within 120 s"
    assert not shm_left(before, since), "the run left shared memory behind"
    return results, errors


def test_continuous_actions_train_through_the_pipeline(from_a_thread):
    results, errors = from_a_thread
    assert results, errors
    (result,) = results
    assert result.global_step == 1024 and result.eval["length_mean"] == 200


def test_trainer_runs_from_a_non_main_thread(from_a_thread):
    results, errors = from_a_thread
    assert not errors and results and results[0].global_step == 1024


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.timeout(300)
def test_learner_trains_on_cuda(tmp_path, no_shm_residue):
    cfg = load_config(None, [*TINY, "infra.device=cuda", "algo.total_steps=2048",
                             f"log.run_dir={tmp_path}"])
    result = Trainer(cfg).fit()
    assert result.global_step == 2048 and result.eval is not None
