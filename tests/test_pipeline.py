"""End to end through processes: results on disk, crashes and signals, /dev/shm left clean."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from conftest import TINY, run_train

from fastrl.memory.segments import leftover_segments

pytestmark = pytest.mark.timeout(240)


def run_dir_of(tmp_path):
    (d,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return d


def test_normal_run_writes_results_and_leaves_no_segments(tmp_path, no_shm_residue):
    proc = run_train([*TINY, "algo.total_steps=2048", "seed=3"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["global_step"] == 2048
    assert summary["eval"]["return_mean"] > 0
    run = run_dir_of(tmp_path)
    assert (run / "config.yaml").read_text().count("seed: 3") == 1
    assert len((run / "config_hash").read_text().strip()) == 64
    assert (run / "model.pt").exists() and (run / "result.json").exists()
    assert list((run / "tb").glob("events.out.tfevents.*"))


def test_tensorboard_has_the_documented_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    proc = run_train([*TINY, "algo.total_steps=4096", "log.eval_every_steps=2048"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    acc = EventAccumulator(str(run_dir_of(tmp_path) / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for tag in ["episode/return_mean", "episode/return_std", "episode/return_min",
                "episode/return_max", "episode/length_mean", "loss/policy_loss",
                "loss/value_loss", "loss/entropy", "loss/approx_kl", "loss/clip_frac",
                "loss/grad_norm", "train/lr", "train/steps_per_sec", "train/policy_lag",
                "train/ring_occupancy", "eval/return_mean"]:
        assert tag in tags, f"missing TensorBoard scalar {tag}"
    steps = [e.step for e in acc.Scalars("loss/policy_loss")]
    assert steps == sorted(set(steps)) and steps[-1] == 4096


def children_started(proc: subprocess.Popen, n: int, timeout: float = 120) -> list[psutil.Process]:
    """Wait until ``proc`` has ``n`` multiprocessing children and has begun to train."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = [c for c in psutil.Process(proc.pid).children()
                if "spawn_main" in " ".join(c.cmdline())]
        if len(kids) >= n and leftover_segments(f"{proc.pid}_"):
            time.sleep(4)  # let them import torch and step a few slots
            return kids
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"run did not start: {proc.communicate()}")


def start_train(args, tmp_path):
    cmd = [sys.executable, "-m", "fastrl.train", *TINY, *args, f"log.run_dir={tmp_path}"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def all_gone(pids: list[int], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                   for p in pids):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stop_signal_is_a_clean_exit(sig, tmp_path, no_shm_residue):
    proc = start_train(["algo.total_steps=100000000", "algo.target_return=null"], tmp_path)
    kids = children_started(proc, 3)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["stopped_by_signal"] is True
    assert all_gone([k.pid for k in kids])
    assert (run_dir_of(tmp_path) / "model.pt").exists()


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_second_signal_exits_at_once_without_residue(second, tmp_path, no_shm_residue):
    # A hung env keeps the learner from finishing: only the second signal ends the run.
    proc = start_train(["env.id=scripted_envs:Hang-v0", "infra.worker_timeout_s=600",
                        "algo.target_return=null"], tmp_path)
    kids = children_started(proc, 3)
    proc.send_signal(signal.SIGINT)
    time.sleep(1)  # the supervisor is now waiting for the children to stop
    t0 = time.monotonic()
    proc.send_signal(second)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - t0 < 20, "the second signal did not cut the grace period"
    assert "Traceback" not in err
    assert all_gone([k.pid for k in kids])


def test_ctrl_c_to_the_process_group_during_startup_is_a_clean_stop(tmp_path, no_shm_residue):
    cmd = [sys.executable, "-m", "fastrl.train", *TINY, "algo.total_steps=100000000",
           "algo.target_return=null", f"log.run_dir={tmp_path}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # own group: the terminal's view of it
    deadline = time.monotonic() + 60
    while not [c for c in psutil.Process(proc.pid).children()
               if "spawn_main" in " ".join(c.cmdline())] and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # children are still importing torch
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["stopped_by_signal"] is True


def test_hung_worker_is_reported_and_the_run_ends(tmp_path, no_shm_residue):
    proc = run_train([*TINY, "env.id=scripted_envs:Hang-v0", "infra.worker_timeout_s=3"],
                     tmp_path)
    assert proc.returncode == 1
    assert "has not made progress" in proc.stderr and "worker_timeout_s=3" in proc.stderr


def test_workers_may_run_ahead_within_max_policy_lag(tmp_path, no_shm_residue):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    proc = run_train([*TINY, "algo.total_steps=4096", "infra.max_policy_lag=2",
                      "infra.ring_slots=3"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    acc = EventAccumulator(str(run_dir_of(tmp_path) / "tb"))
    acc.Reload()
    lags = [e.value for e in acc.Scalars("train/policy_lag")]
    assert max(lags) <= 2


def test_killed_worker_is_a_clear_error_and_a_clean_shutdown(tmp_path, no_shm_residue):
    proc = start_train(["algo.total_steps=100000000", "algo.target_return=null"], tmp_path)
    kids = children_started(proc, 3)
    victim = max(kids, key=lambda k: k.pid)  # started last: a worker, never the learner
    victim.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert f"worker 1 (pid {victim.pid}) was killed by SIGKILL" in err, err
    assert all_gone([k.pid for k in kids])


def test_exception_in_env_names_the_process_and_shows_its_traceback(tmp_path, no_shm_residue):
    proc = run_train([*TINY, "env.id=scripted_envs:Faulty-v0"], tmp_path)
    assert proc.returncode == 1
    assert "run failed: worker" in proc.stderr
    assert "RuntimeError: scripted failure at step 300" in proc.stderr


def test_too_little_shared_memory_is_refused_before_allocating(tmp_path, no_shm_residue):
    proc = run_train([*TINY, "infra.rollout_len=1000000", "infra.envs_per_worker=100000",
                      "algo.num_minibatches=1"], tmp_path)
    assert proc.returncode == 1
    assert "bytes of shared memory" in proc.stderr and "infra.ring_slots" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_killed_supervisor_leaves_no_orphans_or_segments(tmp_path, no_shm_residue):
    proc = start_train(["algo.total_steps=100000000", "algo.target_return=null"], tmp_path)
    kids = children_started(proc, 3)
    proc.kill()
    proc.communicate(timeout=30)
    # Children notice they were orphaned; Python's resource tracker unlinks the segments.
    assert all_gone([k.pid for k in kids], timeout=30), "orphaned children kept running"
    deadline = time.monotonic() + 30
    while leftover_segments(f"{proc.pid}_") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not leftover_segments(f"{proc.pid}_")


def test_same_seed_same_weights_and_runs_never_overwrite(tmp_path):
    import torch

    args = [*TINY, "algo.total_steps=1024", "seed=5"]
    for _ in range(2):
        proc = run_train(args, tmp_path)
        assert proc.returncode == 0, proc.stderr
    runs = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    assert len(runs) == 2, "the second run reused the first run's directory"
    a, b = (torch.load(r / "model.pt")["model"] for r in runs)
    assert all(torch.equal(a[k], b[k]) for k in a), "same seed gave different weights"
    proc = run_train([*args, f"log.run_name={runs[0].name}"], tmp_path)
    assert proc.returncode == 2 and "already exists" in proc.stderr


def test_continuous_actions_train_through_the_pipeline(tmp_path, no_shm_residue):
    proc = run_train([*TINY, "env.id=Pendulum-v1", "algo.total_steps=1024",
                      "algo.target_return=null"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["global_step"] == 1024 and summary["eval"]["length_mean"] == 200
