"""Fault injection through real processes: killed, hung and failing workers are restarted;
a failure budget stops the run with a checkpoint; a dead learner leaves a resumable run.
Every test is bounded and checks /dev/shm afterwards."""

from __future__ import annotations

import random
import re
import signal
import time

import pytest
from conftest import ENDLESS, TINY, last_json, run_dir_of, run_train, wait_training

from fastrl.checkpoint import latest_valid

pytestmark = pytest.mark.timeout(300)


def tb_scalars(run_dir, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb"))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_killed_worker_is_restarted_and_the_run_still_solves_cartpole(launch, tmp_path):
    # The default config (CartPole-v1, solve bar 475) with every slot's CRC checked: a
    # worker SIGKILLed at a random moment, often mid-slot, must never hand over torn data.
    proc = launch(["infra.check_slots=true", "seed=2"], tiny=False)
    kids = wait_training(proc, tmp_path)
    time.sleep(random.uniform(0, 0.5))
    victim = kids[-1]  # started last: worker 1
    victim.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    result = last_json(out)
    assert result["restarts"] == 1 and result["eval"]["return_mean"] >= 475, result
    assert f"restart 1: worker 1 (pid {victim.pid}) was killed by SIGKILL" in err
    run = run_dir_of(tmp_path)
    assert max(v for _, v in tb_scalars(run, "supervisor/restarts")) == 1
    assert all(v < 60 for _, v in tb_scalars(run, "supervisor/heartbeat_age_max_s"))


def test_hung_worker_is_detected_within_the_timeout_and_restarted(tmp_path, no_shm_residue):
    # The first env to reach step 300 hangs in step(); the restarted worker's envs do not.
    marker = tmp_path / "stuck"
    proc = run_train([*TINY, "env.id=scripted_envs:Hang-v0", f"env.kwargs.hang_marker={marker}",
                      "env.kwargs.hang_once=true", "infra.worker_timeout_s=3",
                      "algo.total_steps=4096", "log.eval_max_steps=200"], tmp_path)
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


def test_env_that_always_raises_stops_after_max_restarts(tmp_path, no_shm_residue):
    # Faulty-v0 raises at each env's 300th step, in every incarnation of the worker.
    proc = run_train([*TINY, "env.id=scripted_envs:Faulty-v0", "infra.max_restarts=2",
                      *ENDLESS], tmp_path)
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


def test_env_that_breaks_its_contract_is_not_restarted(tmp_path, no_shm_residue):
    # LateWrongShape-v0 passes the check before the start, then returns observations of the
    # wrong shape from its step 100: no restart can fix that.
    proc = run_train([*TINY, "env.id=scripted_envs:LateWrongShape-v0", *ENDLESS], tmp_path)
    assert proc.returncode == 1
    assert "not restarted, the env itself is at fault" in proc.stderr, proc.stderr
    assert "EnvContractError: env 'scripted_envs:LateWrongShape-v0' broke the env contract " \
        "in step(): the observation should be a float32 array of shape (1,)" in proc.stderr
    assert "restart 1" not in proc.stderr and "Traceback" not in proc.stderr


def test_killed_learner_stops_the_run_and_names_the_checkpoint_to_resume(launch, tmp_path):
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
    resumed = launch([f"algo.total_steps={ckpt.global_step + 512}"], tiny=False, resume=run)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert last_json(out)["global_step"] == ckpt.global_step + 512
    assert f"at global step {ckpt.global_step:,}" in err
