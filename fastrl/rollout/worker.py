"""The rollout worker process: attach to its ring, build envs, fill and publish slots."""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
from dataclasses import dataclass

import numpy as np
import psutil
import torch

from fastrl.checkpoint import parked_path, write_atomically
from fastrl.memory.ring import (
    ACT_NS,
    ENV_NS,
    FILL_NS,
    HEARTBEAT_NS,
    STEPS,
    TERMINATE,
    VERSION_SEEN,
    Ring,
)
from fastrl.memory.segments import attach
from fastrl.memory.wait import Stopped, wait_until
from fastrl.memory.weights import SharedWeights
from fastrl.models.policy import load_flat_params
from fastrl.plan import RunPlan
from fastrl.process import become_child, report_crash, rng_state, seed_everything, set_rng_state
from fastrl.rollout.actors import EpsilonGreedy, apex_epsilon, policy_actor, random_actor
from fastrl.rollout.collector import Collector
from fastrl.rollout.envs import EnvContractError, EnvError, env_seeds

EXIT_BROKEN_ENV = 3  # an EnvError (cannot be made, breaks its spaces): a restart cannot help


@dataclass
class WorkerSpec:
    """Everything a worker process needs, picklable for ``spawn``.

    ``incarnation`` counts this worker's restarts (it derives fresh env seeds);
    ``resume_state`` is the checkpointed state file to continue from, if any.
    """

    plan: RunPlan
    worker_id: int
    ring_name: str
    weights_name: str
    run_dir: str
    parent_pid: int
    incarnation: int = 0
    resume_state: str | None = None


class Terminated(BaseException):
    """The supervisor ended this worker (SIGTERM after setting the ring's TERMINATE word)."""


def run_worker(spec: WorkerSpec) -> None:
    """Process entry point. Exits 0 when the run stops, 1 (after a crash report) on error."""
    become_child(spec.parent_pid)
    torch.set_num_threads(1)
    if spec.plan.cfg.infra.pin_workers:
        cores = sorted(os.sched_getaffinity(0))
        psutil.Process().cpu_affinity([cores[spec.worker_id % len(cores)]])
    try:
        _worker_loop(spec)
    except (Stopped, Terminated):
        pass
    except BaseException as e:
        report_crash(spec.run_dir, f"worker {spec.worker_id}", e,
                     f"worker {spec.worker_id} (incarnation {spec.incarnation}) stepping env "
                     f"{spec.plan.cfg.env.id!r}:")
        os._exit(EXIT_BROKEN_ENV if isinstance(e, EnvError) else 1)


def _terminate_on_request(ring: Ring) -> None:
    """Turn SIGTERM into :class:`Terminated` when the supervisor asked for it.

    Children ignore SIGTERM (see fastrl.process.become_child) because a group SIGTERM is a
    graceful stop of the whole run, which the supervisor drives. The supervisor sets this
    ring's TERMINATE word before it sends SIGTERM to a hung worker: only then does the
    signal end the worker, from inside a stuck ``env.step`` if need be, so that the envs are
    closed on the way out. A worker stuck in C code gets SIGKILL after a grace period.
    """
    def handler(signum, frame):
        if ring.get(TERMINATE):
            raise Terminated

    signal.signal(signal.SIGTERM, handler)


def _park(spec: WorkerSpec, collector: Collector, write_seq: int) -> None:
    """At the end of the run, leave this worker's state for the learner's final checkpoint,
    so that a resumed run continues these very episodes."""
    state = {"write_seq": write_seq, "collector": collector.state(), "rng": rng_state()}
    try:
        blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        print(f"fastrl worker {spec.worker_id}: its envs cannot be pickled ({e}); a resumed "
              "run will start them on fresh episodes", file=sys.stderr)
        return
    write_atomically(parked_path(spec.run_dir, spec.worker_id, write_seq), blob)


def _worker_loop(spec: WorkerSpec) -> None:
    plan = spec.plan
    cfg, infra = plan.cfg, plan.cfg.infra
    n = infra.envs_per_worker
    # n env seeds plus one for this process's action sampling, all derived from the run seed
    *seeds, sampling_seed = env_seeds(cfg.seed, spec.worker_id, n + 1, spec.incarnation)
    seed_everything(sampling_seed)
    envs = plan.env.make(seeds)
    if (envs.observation_space, envs.action_space) != (plan.obs_space, plan.act_space):
        raise EnvContractError(
            f"env {cfg.env.id!r} made in worker {spec.worker_id} has spaces "
            f"{envs.observation_space}, {envs.action_space}; the run was planned for "
            f"{plan.obs_space}, {plan.act_space} (an env's spaces must not vary)"
        )
    ring_shm, weights_shm = attach(spec.ring_name), attach(spec.weights_name)
    ring = Ring(ring_shm.buf, plan.layout, infra.ring_slots)
    weights = SharedWeights(weights_shm.buf, plan.num_params)
    _terminate_on_request(ring)

    def beat() -> None:
        ring.set(HEARTBEAT_NS, time.monotonic_ns())

    def should_stop() -> bool:
        beat()  # called from every wait loop: a waiting worker is alive too
        return weights.run_over()

    policy = plan.policy()
    params = np.empty(plan.num_params, np.float32)
    algo = cfg.algo
    explore = random_actor(plan.act_space, n, sampling_seed)
    if algo.random_actions:
        act = explore
    elif algo.name == "dqn":
        act = EpsilonGreedy(policy, plan.act_space, sampling_seed + 1)  # not explore's stream
    else:
        act = policy_actor(policy)
    collector = Collector(envs, act, spec.worker_id * n, cfg.total_envs, beat)
    # On-policy, slot k waits for the weights of update k - max_policy_lag; off-policy workers
    # never wait: they act with the newest weights they have.
    waits_for_weights = plan.trains and not algo.off_policy
    if spec.resume_state:
        with open(spec.resume_state, "rb") as f:
            state = pickle.load(f)  # our own checkpoint, its checksum verified
        collector.restore(state["collector"])
        set_rng_state(state["rng"])
    # The ring outlives a restarted worker: its counters continue where the last one was.
    base = {k: ring.get(k) for k in (STEPS, ACT_NS, ENV_NS, FILL_NS)}
    steps_per_slot = infra.rollout_len * n
    version = -1
    try:
        while True:
            if should_stop():  # checked once per slot too: a drained ring never makes us wait
                raise Stopped
            wait_until(ring.has_free_slot, should_stop)
            needed = max(0, ring.write_seq - infra.max_policy_lag) if waits_for_weights else 0
            wait_until(lambda n=needed: weights.version(should_stop) >= n, should_stop)
            if weights.version(should_stop) != version:
                version = weights.read_into(params, should_stop)
                load_flat_params(policy, params)
                ring.set(VERSION_SEEN, version)
            if algo.off_policy:
                # Until the learner's first update its weights are noise: act at random.
                collector.act = explore if version == 0 else act
                if isinstance(act, EpsilonGreedy):
                    act.epsilon = apex_epsilon(algo.dqn, spec.worker_id, infra.num_workers,
                                               base[STEPS] * infra.num_workers,
                                               algo.total_steps)
            collector.fill(ring.write_slot(), ring.write_seq, version)
            if infra.check_slots:
                ring.stamp()
            ring.publish()
            base[STEPS] += steps_per_slot
            ring.set(STEPS, base[STEPS])
            ring.set(ACT_NS, base[ACT_NS] + collector.act_ns)
            ring.set(ENV_NS, base[ENV_NS] + collector.env_ns)
            ring.set(FILL_NS, base[FILL_NS] + collector.fill_ns)
    except Stopped:
        if plan.trains:
            _park(spec, collector, ring.write_seq)
        raise
    finally:
        collector.envs.close()
