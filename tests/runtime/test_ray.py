"""infra.runtime=ray on a local Ray started by these tests (or by fastrl itself): the same
training as the local runtime bit for bit, stop and resume, and the supervisor's guarantees
for killed, hung and failing worker actors. Every run is bounded; /dev/shm is checked. (The
Ray solve: tests/e2e/test_solve.py.)"""

from __future__ import annotations

import os
import random
import re
import signal
import sys
import time

import psutil
import pytest
import ray
from helpers import (
    ENDLESS,
    RAY,
    STRAIGHT,
    STRAIGHT_STEPS,
    TINY,
    all_gone,
    kill_then_stop,
    last_json,
    remote_workers,
    resume_main,
    run_dir_of,
    run_train,
    same_weights,
    train_main,
    wait_updates,
)

from fastrl.checkpoint import latest_valid
from fastrl.config import ConfigError, load_config
from fastrl.runtime.ray_workers import RayUnavailable, import_ray
from fastrl.trainer import Trainer

pytestmark = pytest.mark.timeout(300)


# --- without a cluster ---------------------------------------------------------------------

def test_missing_ray_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(RayUnavailable, match=r"pip install -c constraints.txt -e '\.\[ray\]'"):
        import_ray()


@pytest.mark.parametrize("overrides,message", [
    (["infra.ray_address=auto"], "only applies to infra.runtime=ray, not local"),
    ([*RAY, "infra.pin_workers=true"], "the ray runtime places the workers itself"),
    (["infra.runtime=cluster"], "must be one of local, serial, ray"),
])
def test_ray_config_mistakes_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


# --- on the module's Ray ----------------------------------------------------------------------

def test_a_cluster_without_enough_cpus_is_refused_at_once(ray_address, tmp_path,
                                                          no_shm_residue):
    cfg = load_config(None, [*TINY, *RAY, "infra.num_workers=4", f"log.run_dir={tmp_path}"])
    started = time.monotonic()
    with pytest.raises(RayUnavailable, match="infra.num_workers=4 needs 4 CPUs of the Ray "
                       "cluster .* it has 3"):
        Trainer(cfg).fit()
    assert time.monotonic() - started < 30
    assert ray.is_initialized()  # the caller's connection is left alone


@pytest.mark.parametrize("algo", ["appo", "dqn"])
def test_asynchronous_and_off_policy_algorithms_run_on_ray(algo, ray_address, tmp_path,
                                                           no_shm_residue):
    extra = ["algo.replay.learning_starts=256"] if algo == "dqn" else []
    cfg = load_config(None, [*TINY, *RAY, f"algo.name={algo}", "algo.total_steps=3072",
                             "algo.target_return=null", "infra.check_slots=true",
                             f"log.run_dir={tmp_path}", "log.metrics_every_s=0", *extra])
    result = Trainer(cfg).fit()
    assert result.global_step >= 3072 and result.restarts == 0
    if algo == "appo":  # workers ran ahead of the learner, within the lag bound
        assert 0 <= result.metrics["policy_lag"] <= cfg.policy_lag_bound
    assert ray.is_initialized()
    assert not remote_workers(), "worker actors outlived the run"


@pytest.mark.slow  # the Ray twin of test_faults.py's
def test_killed_actor_is_restarted_and_training_goes_on(ray_address, launch, tmp_path):
    # Every slot's CRC checked: an actor SIGKILLed at a random moment, often mid-slot, never
    # hands over torn data; the supervisor starts another, whose slots go on training.
    proc = launch([*RAY, f"infra.ray_address={ray_address}", "infra.check_slots=true",
                   "seed=2", *ENDLESS, "log.metrics_every_s=0"])
    wait_updates(proc, tmp_path)
    victim = remote_workers()[0]
    err = kill_then_stop(proc, run_dir_of(tmp_path), victim, timeout=90)
    assert f"(Ray actor pid {victim.pid} on " in err, err
    assert "restart 1: worker" in err and "was killed by SIGKILL" in err, err


@pytest.mark.slow  # the Ray twin of test_faults.py's
def test_hung_actor_is_detected_within_the_timeout_and_restarted(ray_address, tmp_path,
                                                                 no_shm_residue, capfd):
    # The first env to reach step 300 hangs in step(); the restarted actor's envs do not.
    # (In this process: fastrl uses the module's connection to its Ray.)
    marker = tmp_path / "stuck"
    proc = train_main([*TINY, *RAY, f"infra.ray_address={ray_address}",
                       "env.id=scripted_envs:Hang-v0", f"env.kwargs.hang_marker={marker}",
                       "env.kwargs.hang_once=true", "infra.worker_timeout_s=3",
                       "algo.total_steps=4096", "log.eval_max_steps=200"], tmp_path, capfd)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists(), "no env hung: not a mid-run hang"
    assert "restart 1: worker" in proc.stderr and "has not made progress for" in proc.stderr \
        and "(infra.worker_timeout_s=3)" in proc.stderr, proc.stderr
    result = last_json(proc.stdout)
    assert result["global_step"] == 4096 and result["restarts"] == 1


@pytest.mark.slow  # the Ray twin of test_faults.py's
def test_actor_whose_env_always_raises_stops_the_run_after_max_restarts(ray_address, tmp_path,
                                                                       no_shm_residue, capfd):
    proc = train_main([*TINY, *RAY, f"infra.ray_address={ray_address}",
                       "env.id=scripted_envs:Faulty-v0", "infra.max_restarts=2", *ENDLESS],
                      tmp_path, capfd)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    assert "run failed: 3 worker failures within 300 s (infra.max_restarts=2)" in err, err
    assert "stepping env 'scripted_envs:Faulty-v0'" in err
    assert "RuntimeError: scripted failure at step 300" in err
    run = run_dir_of(tmp_path)
    ckpt, skipped = latest_valid(run)
    assert ckpt is not None and not skipped and ckpt.manifest["final"]
    assert f"resume with: python -m fastrl.train --resume {run}" in err


@pytest.mark.slow  # the Ray twin of test_faults.py's
def test_actor_whose_env_breaks_its_contract_is_not_restarted(ray_address, tmp_path,
                                                              no_shm_residue, capfd):
    proc = train_main([*TINY, *RAY, f"infra.ray_address={ray_address}",
                       "env.id=scripted_envs:LateWrongShape-v0", *ENDLESS], tmp_path, capfd)
    assert proc.returncode == 1
    assert "not restarted, the env itself is at fault" in proc.stderr, proc.stderr
    assert "EnvContractError: env 'scripted_envs:LateWrongShape-v0' broke the env contract" \
        in proc.stderr
    assert "restart 1" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow  # a second Ray cluster, of two nodes
def test_workers_spread_over_the_nodes_of_a_cluster(tmp_path, no_shm_residue):
    # Two Ray nodes of one CPU each on this machine (two raylets, two object stores): the
    # placement group puts one worker on each, and the weights reach both through the
    # object store.
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        proc = run_train([*TINY, *RAY, f"infra.ray_address={cluster.address}",
                          "algo.total_steps=2048"], tmp_path)
    finally:
        cluster.shutdown()
    assert proc.returncode == 0, proc.stderr
    nodes = dict(re.findall(r"worker (\d) started on \S+ \(node (\w+)\)", proc.stderr))
    assert set(nodes) == {"0", "1"} and nodes["0"] != nodes["1"], proc.stderr
    assert last_json(proc.stdout)["global_step"] == 2048


# --- fastrl's own local Ray -------------------------------------------------------------------

@pytest.mark.slow  # a Ray of its own, started and stopped by fastrl, and a resume
def test_ray_trains_bit_identically_to_local_through_a_stop_and_resume(launch, tmp_path,
                                                                      straight_run,
                                                                      ray_address, capfd):
    # Fixed seed, max_policy_lag=0: the same slots and the same weights versions reach the
    # learner whichever runtime collects them. "Train to S locally" equals "train on a
    # local Ray that fastrl starts, SIGTERM to its whole process group (as a service manager
    # stops it: Ray's daemons get it too) at a random moment, --resume on Ray (the module's,
    # in this process), train to S" parameter for parameter; every Ray process fastrl
    # started is gone after the run.
    local = straight_run(2)  # TINY + STRAIGHT, uninterrupted, on the local runtime
    interrupted = launch([*STRAIGHT, *RAY, "log.run_name=ray"])
    run = tmp_path / "ray"
    deadline = time.monotonic() + 120
    while latest_valid(run)[0] is None:
        assert interrupted.poll() is None and time.monotonic() < deadline, \
            interrupted.communicate(timeout=30)
        time.sleep(0.2)
    ray_procs = psutil.Process(interrupted.pid).children(recursive=True)
    assert any("raylet" in p.name() for p in ray_procs)
    time.sleep(random.uniform(0, 1))
    os.killpg(interrupted.pid, signal.SIGTERM)  # (launch: its own session and group)
    out, err = interrupted.communicate(timeout=90)
    assert interrupted.returncode == 0, err
    stopped = last_json(out)
    assert stopped["stopped_by_signal"] and 0 < stopped["global_step"] < STRAIGHT_STEPS, stopped
    ckpt, _ = latest_valid(run)
    assert ckpt.global_step == stopped["global_step"]
    assert ckpt.file("worker-0.pkl") is not None, "the actors' states were not parked"
    assert all_gone(ray_procs, timeout=30), "Ray processes outlived the run"

    resumed = resume_main(run, [f"infra.ray_address={ray_address}"], capfd)
    assert resumed.returncode == 0, resumed.stderr
    assert f"at global step {stopped['global_step']:,}" in resumed.stderr
    assert same_weights(local, run), "ray's weights differ from local's"
