"""The rollout worker process: attach to its ring, build envs, fill and publish slots."""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
from contextlib import suppress
from dataclasses import dataclass

import numpy as np
import psutil
import torch

from fastrl.algos.base import DataMode
from fastrl.checkpoint import parked_path
from fastrl.core import jit
from fastrl.core.files import DiskFull, write_atomically
from fastrl.core.process import (
    become_child,
    report_crash,
    rng_state,
    seed_everything,
    set_rng_state,
)
from fastrl.core.timing import StageTimer
from fastrl.envs.source import EnvContractError, EnvError
from fastrl.memory.control import RunControl
from fastrl.memory.ring import (
    ACT_NS,
    ENV_NS,
    FILL_NS,
    HEARTBEAT_NS,
    JIT_NS,
    STEPS,
    SYNC_NS,
    TERMINATE,
    VERSION_SEEN,
    WAIT_NS,
    Ring,
)
from fastrl.memory.segments import attach
from fastrl.memory.wait import Stopped, wait_until
from fastrl.memory.weights import SharedWeights
from fastrl.models.actors import random_actor
from fastrl.models.policy import load_flat_params
from fastrl.plan import RunPlan
from fastrl.population.actor import PopulationActor, acts_stacked
from fastrl.resume import load_parked, park_blob
from fastrl.rollout.collector import Collector
from fastrl.selfplay.actor import SelfPlayActor
from fastrl.selfplay.seats import learning_rows

EXIT_BROKEN_ENV = 3  # an EnvError (cannot be made, breaks its spaces): a restart cannot help
# The ring counters a worker adds to (a restarted one continues from the last one's values).
WORKER_COUNTERS = (STEPS, ACT_NS, ENV_NS, FILL_NS, SYNC_NS, WAIT_NS, JIT_NS)


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
    control_name: str
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
        code = report_crash(spec.run_dir, f"worker {spec.worker_id}", e,
                            f"worker {spec.worker_id} (incarnation {spec.incarnation}) "
                            f"stepping env {spec.plan.cfg.env.id!r}:")
        os._exit(EXIT_BROKEN_ENV if isinstance(e, EnvError) else code)


def _terminate_on_request(ring: Ring) -> None:
    """Turn SIGTERM into :class:`Terminated` when the supervisor asked for it.

    Children ignore SIGTERM (see fastrl.core.process.become_child) because a group SIGTERM is a
    graceful stop of the whole run, which the supervisor drives. The supervisor sets this
    ring's TERMINATE word before it sends SIGTERM to a hung worker: only then does the
    signal end the worker, from inside a stuck ``env.step`` if need be, so that the envs are
    closed on the way out. A worker stuck in C code gets SIGKILL after a grace period.
    """
    def handler(signum, frame):
        if ring.get(TERMINATE):
            raise Terminated

    signal.signal(signal.SIGTERM, handler)


def weights_needed(plan: RunPlan, seq: int) -> int:
    """The oldest weights version slot ``seq`` may be collected with, by the algorithm's
    data mode (:meth:`fastrl.algos.base.Algorithm.weights_needed`)."""
    return plan.cfg.algo.algorithm.weights_needed(seq, plan.cfg.policy_lag_bound)


def _worker_loop(spec: WorkerSpec) -> None:
    plan = spec.plan
    ring_shm, weights_shm = attach(spec.ring_name), attach(spec.weights_name)
    control_shm = attach(spec.control_name)
    ring = Ring(ring_shm.buf, plan.layout, plan.cfg.infra.ring_slots)
    weights, pool = plan.weights_of(weights_shm.buf)
    worker = RolloutWorker(spec, ring, weights, RunControl(control_shm.buf),
                           state=load_parked(spec.resume_state), pool=pool)
    _terminate_on_request(ring)
    try:
        while True:
            if worker.should_stop():  # checked once per slot: a drained ring never waits
                raise Stopped
            worker.wait_until_ready()
            worker.fill_one()
    except Stopped:
        worker.park()
        raise
    finally:
        worker.close()


class RolloutWorker:
    """One worker's envs, policy copy and collector, filling its ring one slot at a time.

    A worker process loops on :meth:`wait_until_ready` and :meth:`fill_one`; the serial
    runtime (fastrl.runtime.serial) calls :meth:`fill_one` whenever :meth:`ready` while the learner
    waits for data. ``timer`` gets the worker's rollout, weight-sync and waiting time.
    """

    def __init__(self, spec: WorkerSpec, ring: Ring, weights: SharedWeights,
                 control: RunControl, timer: StageTimer | None = None,
                 state: dict | None = None, pool: SharedWeights | None = None) -> None:
        plan = spec.plan
        cfg, infra = plan.cfg, plan.cfg.infra
        self.spec, self.ring, self.weights, self.control = spec, ring, weights, control
        self.timer = timer or StageTimer()
        n = infra.envs_per_worker
        # n env seeds and this process's action sampling (a population's: each member's),
        # all from the run seed
        seeds, sampling_seeds = plan.worker_seeds(spec.worker_id, spec.incarnation)
        sampling_seed = sampling_seeds[0]
        seed_everything(sampling_seed)
        envs = plan.env.make(seeds[:n // plan.rows_per_env])  # a multi-agent env: A rows
        if (envs.observation_space, envs.action_space) != (plan.obs_space, plan.act_space):
            envs.close()
            raise EnvContractError(
                f"env {cfg.env.id!r} made in worker {spec.worker_id} has spaces "
                f"{envs.observation_space}, {envs.action_space}; the run was planned for "
                f"{plan.obs_space}, {plan.act_space} (an env's spaces must not vary)"
            )
        self.policy = plan.policy(sampling_seeds)
        self.params = np.empty(plan.num_params, np.float32)
        self.algorithm = cfg.algo.algorithm
        self.explore = random_actor(plan.obs_space, plan.act_space, n, sampling_seed)
        # (an actor that draws its own random numbers takes another stream than explore's)
        if cfg.algo.random_actions:
            self.act = self.explore
        elif plan.population is not None:  # each member acts for its rows, from its streams
            self.act = PopulationActor(
                self.policy,
                [self.algorithm.make_actor(self.policy.member(k), plan.act_space, s + 1,
                                           infra.worker_inference)
                 for k, s in enumerate(sampling_seeds)],
                self.policy.streams, plan.population.rows,
                stacked=acts_stacked(self.policy, cfg.population.exact,
                                     infra.worker_inference))
        else:
            self.act = self.algorithm.make_actor(self.policy, plan.act_space,
                                                 sampling_seed + 1, infra.worker_inference)
        if pool is not None:  # self-play: the other seat acts with an opponent from the pool
            opponent = plan.policy()
            self.act = SelfPlayActor(
                self.act, opponent, self.algorithm.make_actor(
                    opponent, plan.act_space, sampling_seed + 2, infra.worker_inference),
                learning_rows(spec.worker_id * n // 2, n), pool, cfg.selfplay, cfg.seed,
                spec.worker_id, self.should_stop)
        self.collector = Collector(envs, self.act, spec.worker_id * n, cfg.total_envs,
                                   self.beat, clip_rewards=cfg.env.clip_rewards)
        if state is not None:  # a parked state (load_parked) to continue from
            self.collector.restore(state["collector"])
            self.explore.restore(state.get("explore", {}))
            set_rng_state(state["rng"])
        # The ring outlives a restarted worker: its counters continue where the last one was.
        self.base = {k: ring.get(k) for k in WORKER_COUNTERS}
        self._timer_base = dict(self.timer.ns)
        self.steps_per_slot = plan.slot_steps
        self._unpicklable = False  # (its envs cannot be pickled: said once, parked empty)
        self.version = -1
        self.key = -1  # of the weights acting now (deterministic: fastrl.plan.SlotSchedule)

    def beat(self) -> None:
        """Tell the supervisor this worker is alive."""
        self.ring.set(HEARTBEAT_NS, time.monotonic_ns())

    def should_stop(self) -> bool:
        """Beat (every wait loop calls this: a waiting worker is alive too); True once the
        run is over."""
        self.beat()
        return self.control.run_over()

    def ready(self) -> bool:
        """True when a slot is free and the weights it must be collected with exist."""
        return self.ring.has_free_slot() and self._weights_ready()

    def _weights_ready(self) -> bool:
        """The weights the next slot is collected with are published: deterministic, its
        key's (fastrl.plan.SlotSchedule); else any version from the one it needs."""
        plan, seq = self.spec.plan, self.ring.write_seq
        if plan.schedule:
            return self.weights.has(plan.schedule.weights_key(self.spec.worker_id, seq))
        return self.weights.version(self.should_stop) >= weights_needed(plan, seq)

    def wait_until_ready(self) -> None:
        """Wait (counted as ``waiting``) until :meth:`ready`; raises Stopped."""
        with self.timer.stage("waiting"):
            wait_until(self.ring.has_free_slot, self.should_stop)
            wait_until(self._weights_ready, self.should_stop)

    def _take_weights(self) -> None:
        """Load the weights the next slot is collected with, if they are not those acting
        now: deterministic, its key's; else the newest."""
        schedule = self.spec.plan.schedule
        if schedule:
            key = schedule.weights_key(self.spec.worker_id, self.ring.write_seq)
            if key == self.key:
                return
            self.version = self.weights.read_key(key, self.params, self.should_stop)
            self.key = key
        elif self.weights.version(self.should_stop) != self.version:
            self.version = self.weights.read_into(self.params, self.should_stop)
        else:
            return
        load_flat_params(self.policy, self.params)
        self.ring.set(VERSION_SEEN, self.version)

    def fill_one(self) -> None:
        """Take the weights the next slot is collected with, fill it and publish it; first,
        where the learner's next periodic checkpoint asks for it, leave this worker's state
        as the slot starts (:meth:`park`)."""
        cfg, ring, collector = self.spec.plan.cfg, self.ring, self.collector
        infra = cfg.infra
        if self._park_due():
            self.park()
        with self.timer.stage("sync_weights"):
            self._take_weights()
        if self.algorithm.data is DataMode.REPLAY:
            # Until the learner's first update its weights are noise: act at random.
            collector.act = self.explore if self.version == 0 else self.act
        if self.algorithm.schedule:
            # (the run's step at this slot, from its number: the same after a resume)
            self.algorithm.schedule(self.act, cfg, self.spec.worker_id,
                                    ring.write_seq * self.steps_per_slot * infra.num_workers)
        with self.timer.stage("rollout"):
            collector.fill(ring.write_slot(), ring.write_seq, self.version)
            if infra.check_slots:
                ring.stamp()
            ring.publish()
        self.base[STEPS] += self.steps_per_slot
        ring.set(STEPS, self.base[STEPS])
        self._store_times()

    def _park_due(self) -> bool:
        """The learner's next periodic checkpoint asks for this worker's state at the start
        of the slot it fills next (its first slot from the run-wide slot ``PARK_SEQ`` on)."""
        slot = self.control.park_slot()
        return slot is not None and \
            self.spec.plan.schedule.first_seq(self.spec.worker_id, slot) == self.ring.write_seq

    def _store_times(self) -> None:
        """This worker's time per stage into its ring's counters (fastrl.core.timing)."""
        ring, collector = self.ring, self.collector
        ring.set(ACT_NS, self.base[ACT_NS] + collector.act_ns)
        ring.set(ENV_NS, self.base[ENV_NS] + collector.env_ns)
        ring.set(FILL_NS, self.base[FILL_NS] + collector.fill_ns)
        ring.set(JIT_NS, self.base[JIT_NS] + jit.compile_ns())
        for counter, stage in ((SYNC_NS, "sync_weights"), (WAIT_NS, "waiting")):
            ring.set(counter, self.base[counter] + self.timer.ns[stage]
                     - self._timer_base[stage])

    def parked_state(self) -> bytes | None:
        """The state that continues these episodes from the next slot on (what
        :func:`load_parked` reads back), or None when there is none to keep (said once)."""
        if not self.spec.plan.trains or self._unpicklable:
            return None
        # (the actor acting before the first update, replay algorithms', is not always the
        # collector's now)
        state = {"write_seq": self.ring.write_seq, "collector": self.collector.state(),
                 "explore": self.explore.state(), "rng": rng_state()}
        try:
            return park_blob(state)
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            self._unpicklable = True
            print(f"fastrl worker {self.spec.worker_id}: its envs cannot be pickled ({e}); a "
                  "resumed run will start them on fresh episodes", file=sys.stderr)
            return None

    def park(self) -> None:
        """Leave this worker's state, as of the start of its next slot, for a checkpoint:
        the learner's final one at the end of a training run, or a periodic one
        (fastrl.learner.learner), so that a resumed run continues these very episodes.
        Where there is none to keep, the file is empty: the learner need not wait for it."""
        # On a full disk the run ends anyway, and says so once (the learner's checkpoint,
        # larger, fails too): a resumed run starts these envs afresh.
        with suppress(DiskFull):
            write_atomically(parked_path(self.spec.run_dir, self.spec.worker_id,
                                         self.ring.write_seq), self.parked_state() or b"")

    def close(self) -> None:
        """Store the last wait's time and close the envs."""
        self._store_times()
        self.collector.envs.close()
