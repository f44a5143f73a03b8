"""``infra.runtime=serial``: the workers, their rings and the learner in the calling process.

The same Learner, RolloutWorker, Ring and algorithm code as the multiprocess runtime, in one
thread: whenever the learner waits for data, the workers fill a slot each (the learner's
``produce`` hook), so a breakpoint in an env's ``step`` or in a loss stops the whole run in
one debugger, and an exception in either arrives with its own traceback. No shared memory
is created (the rings live in process memory), no worker is restarted, and throughput is
that of one core.
"""

from __future__ import annotations

import os
from pathlib import Path

from fastrl.core.process import learner_torch
from fastrl.core.timing import StageTimer
from fastrl.learner.learner import Learner, LearnerSpec
from fastrl.memory.ring import INCARNATION, Ring
from fastrl.memory.weights import SharedWeights
from fastrl.plan import RunPlan
from fastrl.rollout.worker import RolloutWorker, WorkerSpec, load_parked
from fastrl.runtime.base import RunState, Runtime
from fastrl.telemetry.events import RunEvents


def run_serial(plan: RunPlan, run_dir: Path, rings: list[Ring], weights: SharedWeights,
               worker_states: dict[int, str], resume: str | None, events: RunEvents,
               tick) -> None:
    """Train in this process to the end of the run.

    ``worker_states`` are parked worker states to continue from (by worker), ``resume`` the
    checkpoint folder the learner continues from, ``events`` takes the learner's messages,
    and ``tick`` is called from every wait (stop requests, checkpoint evaluations).
    """
    timer = StageTimer()  # one process, one clock: worker stages nest in the learner's waits
    workers: list[RolloutWorker] = []

    def produce() -> None:
        tick()
        if weights.run_over():
            if workers and not weights.parked():
                for worker in workers:
                    worker.park()
                weights.mark_parked()
            return
        for worker in workers:
            if worker.ready():
                worker.fill_one()

    # (the learner process's torch settings, see learner_torch; restored afterwards)
    with learner_torch(plan.cfg.infra.learner_threads):
        try:
            learner = Learner(LearnerSpec(plan, [], "", str(run_dir), os.getpid(), resume),
                              events, rings, weights, produce, timer)
            for i, ring in enumerate(rings):
                workers.append(RolloutWorker(
                    WorkerSpec(plan, i, "", "", str(run_dir), os.getpid(),
                               ring.get(INCARNATION), worker_states.get(i)),
                    ring, weights, timer, load_parked(worker_states.get(i))))
            learner.run()
        finally:
            for worker in workers:
                worker.close()


class SerialRuntime(Runtime):
    """``infra.runtime=serial`` (see the module documentation)."""

    in_process = True

    def execute(self, run: RunState) -> None:
        """Train in this thread; a second stop signal interrupts the user's code here."""
        memory = run.memory
        run.stop.in_user_code = True
        run_serial(run.plan, run.run_dir, memory.rings, memory.weights, run.worker_states,
                   run.resume, run.events, lambda: self._tick(run))
        run.stop.in_user_code = False

    @staticmethod
    def _tick(run: RunState) -> None:
        """The look at the outside world, from inside the learner's waits: turn a stop
        request into the stop flag, end at once on a second signal, and keep the checkpoint
        evaluations going."""
        if run.stop.requested():
            run.memory.weights.request_stop()
        if run.stop.forced:
            raise KeyboardInterrupt
        run.evals.poll()
