"""The rollout worker process: attach to its ring, build envs, fill and publish slots."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
import psutil
import torch

from fastrl.memory.ring import ACT_NS, ENV_NS, FILL_NS, HEARTBEAT_NS, Ring
from fastrl.memory.segments import attach
from fastrl.memory.wait import Stopped, wait_until
from fastrl.memory.weights import SharedWeights
from fastrl.models.policy import load_flat_params
from fastrl.plan import RunPlan
from fastrl.process import become_child, report_crash, seed_everything
from fastrl.rollout.actors import policy_actor, random_actor
from fastrl.rollout.collector import Collector
from fastrl.rollout.envs import EnvContractError, env_seeds, make_env_group


@dataclass
class WorkerSpec:
    """Everything a worker process needs, picklable for ``spawn``."""

    plan: RunPlan
    worker_id: int
    ring_name: str
    weights_name: str
    error_dir: str
    parent_pid: int


def run_worker(spec: WorkerSpec) -> None:
    """Process entry point. Exits 0 when the run stops, 1 (after a crash report) on error."""
    become_child(spec.parent_pid)
    torch.set_num_threads(1)
    if spec.plan.cfg.infra.pin_workers:
        cores = sorted(os.sched_getaffinity(0))
        psutil.Process().cpu_affinity([cores[spec.worker_id % len(cores)]])
    try:
        _worker_loop(spec)
    except Stopped:
        pass
    except BaseException as e:
        report_crash(spec.error_dir, f"worker {spec.worker_id}", e)
        os._exit(1)


def _worker_loop(spec: WorkerSpec) -> None:
    plan = spec.plan
    cfg, infra = plan.cfg, plan.cfg.infra
    n = infra.envs_per_worker
    # n env seeds plus one for this process's action sampling, all derived from the run seed
    *seeds, sampling_seed = env_seeds(cfg.seed, spec.worker_id, n + 1)
    seed_everything(sampling_seed)
    envs = make_env_group(cfg.env.id, dict(cfg.env.kwargs), seeds)
    if (envs.observation_space, envs.action_space) != (plan.obs_space, plan.act_space):
        raise EnvContractError(
            f"env {cfg.env.id!r} made in worker {spec.worker_id} has spaces "
            f"{envs.observation_space}, {envs.action_space}; the run was planned for "
            f"{plan.obs_space}, {plan.act_space} (an env's spaces must not vary)"
        )
    ring_shm, weights_shm = attach(spec.ring_name), attach(spec.weights_name)
    ring = Ring(ring_shm.buf, plan.layout, infra.ring_slots)
    weights = SharedWeights(weights_shm.buf, plan.num_params)

    def beat() -> None:
        ring.set(HEARTBEAT_NS, time.monotonic_ns())

    def should_stop() -> bool:
        beat()  # called from every wait loop: a waiting worker is alive too
        return weights.run_over()

    policy = plan.policy()
    params = np.empty(plan.num_params, np.float32)
    if cfg.algo.random_actions:
        act = random_actor(plan.act_space, n, sampling_seed)
    else:
        act = policy_actor(policy)
    collector = Collector(envs, act, spec.worker_id * n, infra.num_workers * n, beat)
    version = -1
    while True:
        if should_stop():  # checked once per slot too: a drained ring never makes us wait
            raise Stopped
        wait_until(ring.has_free_slot, should_stop)
        # Strict on-policy when max_policy_lag=0: slot k waits for the weights of update k.
        needed = max(0, ring.write_seq - infra.max_policy_lag) if plan.trains else 0
        wait_until(lambda n=needed: weights.version(should_stop) >= n, should_stop)
        if weights.version(should_stop) != version:
            version = weights.read_into(params, should_stop)
            load_flat_params(policy, params)
        collector.fill(ring.write_slot(), ring.write_seq, version)
        ring.publish()
        ring.set(ACT_NS, collector.act_ns)
        ring.set(ENV_NS, collector.env_ns)
        ring.set(FILL_NS, collector.fill_ns)
