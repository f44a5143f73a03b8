"""A rollout worker that lives in a Ray actor (``infra.runtime=ray``).

It is the same :class:`~fastrl.rollout.worker.RolloutWorker` as a worker process, over a
one-slot ring and a weights buffer of its own in plain process memory: each :meth:`fill`
call takes the weights the driver sends (when their version moved), fills one slot and
returns its bytes and the worker's counters. The driver (fastrl.runtime.ray_workers) puts the slot
into the learner's ring, so the learner reads exactly what a local worker would have
written. The driver wraps this class with ``ray.remote``.
"""

from __future__ import annotations

import os
import pickle
import socket
from typing import Any

import numpy as np
import torch

from fastrl.core.process import crash_text
from fastrl.envs.errors import EnvError
from fastrl.memory.control import RunControl
from fastrl.memory.ring import WAIT_NS, Ring
from fastrl.plan import RunPlan
from fastrl.rollout.worker import WORKER_COUNTERS, RolloutWorker, WorkerSpec

# The counters a remote worker keeps and the driver copies into the learner's ring. The
# driver keeps WAIT_NS (a remote worker waits for the driver, never in its own loop) and
# VERSION_SEEN (set when it sends the weights, which the worker then acts with) itself.
COUNTERS = tuple(c for c in WORKER_COUNTERS if c != WAIT_NS)


class WorkerCrash(Exception):
    """What a remote worker raises for any failure: ``report`` is the crash report that a
    worker process would have written (fastrl.core.process.crash_text); ``broken_env`` says the
    env itself breaks its contract, so a restart cannot help."""

    def __init__(self, report: str, broken_env: bool) -> None:
        super().__init__(report)
        self.report, self.broken_env = report, broken_env

    def __reduce__(self):  # (Ray pickles it back to the driver)
        return WorkerCrash, (self.report, self.broken_env)


class RemoteWorker:
    """One rollout worker inside a Ray actor; the driver calls :meth:`start` once, then
    :meth:`fill` per slot, then :meth:`finish` at the end of the run."""

    def __init__(self, plan: RunPlan, worker_id: int, incarnation: int) -> None:
        # Nothing that can fail here: Ray reports a failed constructor without its cause.
        self.plan, self.worker_id, self.incarnation = plan, worker_id, incarnation
        self.worker: RolloutWorker | None = None
        self.pool = None  # self-play's pool snapshots, as the relay sends them

    def _crash(self, e: BaseException) -> WorkerCrash:
        context = (f"worker {self.worker_id} (incarnation {self.incarnation}, Ray actor pid "
                   f"{os.getpid()} on {socket.gethostname()}) stepping env "
                   f"{self.plan.cfg.env.id!r}:")
        return WorkerCrash(crash_text(e, context), isinstance(e, EnvError))

    def start(self, write_seq: int, counters: dict[int, int],
              parked: bytes | None) -> tuple[int, str]:
        """Build the envs and the policy; the next slot is ``write_seq``, the counters go on
        from ``counters``, and ``parked`` (RolloutWorker.parked_state) continues a resumed
        run's episodes. Returns this actor's pid and where it runs (host and Ray node)."""
        try:
            torch.set_num_threads(1)
            plan = self.plan
            ring = Ring(memoryview(bytearray(Ring.nbytes(plan.layout, 1))), plan.layout, 1)
            ring.restore(write_seq, write_seq, np.empty((0, plan.layout.nbytes), np.uint8))
            for counter, value in counters.items():
                ring.set(counter, value)
            # (the weights the relay sends, and self-play's pool snapshots)
            weights, self.pool = plan.weights_of(memoryview(bytearray(plan.weights_bytes)))
            spec = WorkerSpec(plan, self.worker_id, "", "", "", "", os.getpid(),
                              self.incarnation)
            # (a run of its own that never stops: the driver ends it with finish())
            control = RunControl(memoryview(bytearray(RunControl.nbytes())))
            self.worker = RolloutWorker(spec, ring, weights, control,
                                        state=pickle.loads(parked) if parked else None,
                                        pool=self.pool)
            import ray  # (this runs in a Ray actor)

            node = ray.get_runtime_context().get_node_id()[:8]
        except BaseException as e:
            raise self._crash(e) from None
        return os.getpid(), f"{socket.gethostname()} (node {node})"

    def fill(self, version: int, key: int, params: np.ndarray | None,
             *opponent: Any) -> tuple[np.ndarray, dict]:
        """Take the weights of ``version`` under ``key`` (when ``params`` is given) and
        self-play's pool snapshot ``opponent`` (``key, version, params``, when given),
        fill the next slot, and return its bytes and the worker's counters."""
        worker = self.worker
        try:
            if params is not None:
                worker.weights.write(params, version, key)
            if opponent:
                snapshot, snapshot_version, snapshot_params = opponent
                self.pool.write(snapshot_params, snapshot_version, snapshot)
            worker.fill_one()
            ring = worker.ring
            data = ring.read_bytes().copy()  # (the slot is reused by the next call)
            ring.release()
        except BaseException as e:
            raise self._crash(e) from None
        return data, {counter: ring.get(counter) for counter in COUNTERS}

    def finish(self) -> bytes | None:
        """End of the run: close the envs; returns the parked state (or None)."""
        try:
            state = self.worker.parked_state()
            self.worker.close()
        except BaseException as e:
            raise self._crash(e) from None
        return state
