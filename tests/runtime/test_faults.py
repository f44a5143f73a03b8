"""Fault injection through real processes: killed, hung and failing workers are restarted
and training goes on after the restart; a failure budget stops the run with a checkpoint; a
dead learner leaves a resumable run; an env that breaks its contract stops the run without a
restart; a killed supervisor leaves nothing behind and its run resumes. Every test is
bounded and checks /dev/shm afterwards."""

from __future__ import annotations

import random
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from helpers import (
    ENDLESS,
    ONE_WORKER,
    TINY,
    kill_then_stop,
    last_json,
    resume_main,
    run_dir_of,
    tb,
    train_main,
    updates_after_restart,
    wait_for,
    wait_training,
)

from fastrl.checkpoint import checkpoints_dir, latest_valid, verify
from fastrl.envs.contract import check_env
from fastrl.envs.source import EnvSource
from fastrl.memory.segments import leftover_segments
from fastrl.runtime.children import Children

pytestmark = pytest.mark.timeout(300)


def test_killed_worker_is_restarted_and_training_goes_on(launch, tmp_path):
    # Every slot's CRC checked: a worker SIGKILLed at a random moment, often mid-slot, must
    # never hand over torn data; its replacement's slots go on training the policy. PPO
    # waits for every worker's slot: each update after the restart had the new worker's.
    proc = launch(["infra.check_slots=true", "seed=2", *ENDLESS, "log.metrics_every_s=0"])
    victim = wait_training(proc, tmp_path)[-1]  # started last: worker 1
    run = run_dir_of(tmp_path)
    err = kill_then_stop(proc, run, victim)
    assert f"restart 1: worker 1 (pid {victim.pid}) was killed by SIGKILL" in err
    assert max(v for _, v in tb(run, "supervisor/restarts")) == 1
    assert all(v < 60 for _, v in tb(run, "supervisor/heartbeat_age_max_s"))


def test_hung_worker_is_detected_within_the_timeout_and_restarted(tmp_path, no_shm_residue,
                                                                  capfd):
    # The first env to reach step 300 hangs in step(); the restarted worker's envs do not.
    marker = tmp_path / "stuck"
    proc = train_main([*TINY, "env.id=scripted_envs:Hang-v0", f"env.kwargs.hang_marker={marker}",
                       "env.kwargs.hang_once=true", "infra.worker_timeout_s=3",
                       "algo.total_steps=4096", "log.eval_max_steps=200",
                       "log.metrics_every_s=0"], tmp_path, capfd)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists(), "no env hung: not a mid-run hang"
    found = re.search(r"restart 1: worker (\d) \(pid \d+\) has not made progress for (\d+) s "
                      r"\(infra.worker_timeout_s=3\)", proc.stderr)
    assert found, proc.stderr
    assert int(found[2]) <= 4, "the hang was detected late"
    # SIGTERM (not SIGKILL) ended it: the exception it raised interrupted the stuck step()
    assert (tmp_path / "stuck.interrupted").exists()
    result = last_json(proc.stdout)
    assert result["global_step"] == 4096 and result["restarts"] == 1
    assert updates_after_restart(run_dir_of(tmp_path)) >= 10, "no training after the restart"


def test_env_that_always_raises_stops_after_max_restarts(tmp_path, no_shm_residue, capfd):
    # Faulty-v0 raises at each env's 300th step, in every incarnation of the worker.
    proc = train_main([*TINY, "env.id=scripted_envs:Faulty-v0", "infra.max_restarts=2",
                       *ENDLESS], tmp_path, capfd)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    assert "run failed: 3 worker failures within 300 s (infra.max_restarts=2)" in err, err
    assert "stepping env 'scripted_envs:Faulty-v0'" in err
    assert "RuntimeError: scripted failure at step 300" in err
    assert "restart 1:" in err and "restart 2:" in err and "giving up" in err
    run = run_dir_of(tmp_path)
    ckpt, skipped = latest_valid(run)
    assert ckpt is not None and not skipped and ckpt.manifest["final"]
    assert f"resume with: python -m fastrl.train --resume {run}" in err
    # each failure's report kept (a last one may come from the other worker while stopping)
    assert len(list((run / "errors").glob("worker-*.failure-*.txt"))) >= 3


def test_env_that_breaks_its_contract_is_not_restarted(tmp_path, no_shm_residue, capfd):
    # LateWrongShape-v0 passes the check before the start, then returns observations of the
    # wrong shape from its step 100: no restart can fix that.
    proc = train_main([*TINY, *ONE_WORKER, "env.id=scripted_envs:LateWrongShape-v0", *ENDLESS],
                      tmp_path, capfd)
    assert proc.returncode == 1
    assert "not restarted, the env itself is at fault" in proc.stderr, proc.stderr
    assert "EnvContractError: env 'scripted_envs:LateWrongShape-v0' broke the env contract " \
        "in step(): the observation should be a float32 array of shape (1,)" in proc.stderr
    assert "restart 1" not in proc.stderr and "Traceback" not in proc.stderr


def test_run_on_an_env_that_breaks_the_contract_later_stops_naming_env_and_field(
        tmp_path, no_shm_residue, capfd):
    # LateNaNReward-v0 returns NaN rewards from its 100th step on: past the up-front check
    # (64 steps). One worker: the fewest processes to start.
    env_id = "scripted_envs:LateNaNReward-v0"
    check_env(EnvSource(env_id, {}), 7)
    proc = train_main([*TINY, "infra.num_workers=1", f"env.id={env_id}", *ENDLESS], tmp_path,
                      capfd)
    assert proc.returncode == 1, proc.stderr
    assert "not restarted, the env itself is at fault" in proc.stderr, proc.stderr
    assert f"stepping env '{env_id}'" in proc.stderr
    assert re.search(r"EnvContractError: env \d+ returned the reward nan", proc.stderr)
    assert "Traceback" not in proc.stderr


def test_killed_learner_stops_the_run_and_names_the_checkpoint_to_resume(launch, tmp_path,
                                                                         capfd):
    proc = launch([*ENDLESS, "log.checkpoint_every_steps=256"])
    learner = wait_training(proc, tmp_path)[0]
    run = run_dir_of(tmp_path)
    deadline = time.monotonic() + 60
    while latest_valid(run)[0] is None and time.monotonic() < deadline:
        time.sleep(0.1)
    learner.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert f"learner (pid {learner.pid}) was killed by SIGKILL" in err, err
    ckpt, skipped = latest_valid(run)
    assert not skipped and ckpt.global_step > 0
    assert f"is intact; resume with: python -m fastrl.train --resume {run}" in err
    resumed = resume_main(run, [f"algo.total_steps={ckpt.global_step + 512}"], capfd)
    assert resumed.returncode == 0, resumed.stderr
    assert last_json(resumed.stdout)["global_step"] == ckpt.global_step + 512
    assert f"at global step {ckpt.global_step:,}" in resumed.stderr


def test_checkpoints_written_beside_training_are_complete_or_absent_after_a_kill(
        launch, tmp_path):
    # A checkpoint every 256 steps of a model big enough that its write takes a while (a
    # thread writes it while training goes on): killed at a random moment, the learner
    # leaves each checkpoint folder whole (its manifest and checksums agree) or none.
    proc = launch([*ENDLESS, "log.checkpoint_every_steps=256", "log.keep_checkpoints=100",
                   "algo.hidden_sizes=[512,512]"])
    learner = wait_training(proc, tmp_path)[0]
    run = run_dir_of(tmp_path)
    wait_for(lambda: latest_valid(run)[0] is not None, proc, 60)
    time.sleep(random.uniform(0.0, 1.0))
    learner.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    folders = [p for p in checkpoints_dir(run).iterdir() if not p.name.startswith(".tmp-")]
    assert folders
    for folder in folders:
        verify(folder)  # raises CheckpointError for a partial one


def test_a_child_killed_by_sigbus_is_told_as_dev_shm_running_out(tmp_path):
    """tmpfs backs segment pages lazily: /dev/shm filling up under a running run kills the
    child that touches a new page with SIGBUS, which its exit names (the run fails: 1)."""
    children = Children(tmp_path)
    children.track("worker 0", SimpleNamespace(pid=123, exitcode=-signal.SIGBUS))
    told = children.describe_exit("worker 0")
    assert told.startswith("worker 0 (pid 123) was killed by SIGBUS (a full /dev/shm")
    assert "bytes free now" in told


def test_a_supervisor_killed_with_sigkill_leaves_nothing_and_its_run_resumes(
        launch, tmp_path, monkeypatch, request):
    # Its children die with the fork server (PDEATHSIG), the resource tracker unlinks the
    # segments, and the next start removes its multiprocessing temp folder.
    # (the runs launched here; short: the fork server's socket path has a length limit)
    temp = Path(tempfile.mkdtemp(prefix="sv-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(temp))
    request.addfinalizer(lambda: shutil.rmtree(temp, ignore_errors=True))
    proc = launch([*ENDLESS, "log.checkpoint_every_steps=256"])
    wait_training(proc, tmp_path)
    run = run_dir_of(tmp_path)
    wait_for(lambda: latest_valid(run)[0] is not None, proc, 60)
    children = psutil.Process(proc.pid).children(recursive=True)
    assert {"fastrl learner", "fastrl worker 0", "fastrl worker 1"} <= \
        {p.name() for p in children}  # (named after their roles)
    proc.kill()
    proc.communicate(timeout=30)
    _, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, alive
    deadline = time.monotonic() + 5
    while leftover_segments(f"{proc.pid}_") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not leftover_segments(f"{proc.pid}_")
    assert [p.name for p in temp.iterdir()] == [p.name for p in temp.glob(
        f"fastrl-mp-{proc.pid}-*")]
    ckpt = latest_valid(run)[0]
    resumed = launch([f"algo.total_steps={ckpt.global_step + 512}"], tiny=False, resume=run)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert f"at global step {ckpt.global_step:,}" in err
    assert last_json(out)["global_step"] == ckpt.global_step + 512
    assert not list(temp.iterdir())  # (the resumed run's start removed the stale one)
