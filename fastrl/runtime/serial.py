"""``infra.runtime=serial``: the workers, their rings and the learner in the calling process.

The same Learner, feeds, RolloutWorker, Ring and algorithm code as the multiprocess runtime,
in one thread, as a two-verb loop: the learner trains on a batch when its feed has one
ready, and otherwise every worker that can fills a slot. So a breakpoint in an env's
``step`` or in a loss stops the whole run in one debugger, and an exception in either
arrives with its own traceback. No shared memory is created (the rings live in process
memory), no worker is restarted, and throughput is that of one core.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from fastrl.core.process import learner_torch
from fastrl.core.timing import StageTimer
from fastrl.learner.learner import Learner, LearnerSpec
from fastrl.memory.ring import INCARNATION
from fastrl.memory.wait import Stopped
from fastrl.resume import load_parked
from fastrl.rollout.worker import RolloutWorker, WorkerSpec
from fastrl.runtime.base import RunState, Runtime
from fastrl.runtime.memory import RunMemory
from fastrl.telemetry.events import RunEvents


def run_serial(memory: RunMemory, run_dir: Path, worker_states: dict[int, str],
               resume: str | None, events: RunEvents, tick: Callable[[], None]) -> None:
    """Train in this process to the end of the run.

    ``worker_states`` are parked worker states to continue from (by worker), ``resume`` the
    checkpoint folder the learner continues from, ``events`` takes the learner's messages,
    and ``tick`` is called between steps (stop requests, checkpoint evaluations).
    """
    plan, control = memory.plan, memory.control
    timer = StageTimer()  # one process, one clock
    workers: list[RolloutWorker] = []
    # (the learner process's torch settings, see learner_torch; restored afterwards)
    with learner_torch(plan.cfg.infra.learner_threads):
        try:
            learner = Learner(LearnerSpec(plan, [], "", "", str(run_dir), os.getpid(), resume),
                              events, memory.rings, memory.weights, control, timer,
                              hooks=plan.learner_hooks(memory.pool))
            for i, ring in enumerate(memory.rings):
                workers.append(RolloutWorker(
                    WorkerSpec(plan, i, "", "", "", str(run_dir), os.getpid(),
                               ring.get(INCARNATION), worker_states.get(i)),
                    ring, memory.weights, control, timer, load_parked(worker_states.get(i)),
                    pool=memory.pool))
            try:
                learner.start()
                while True:
                    tick()
                    if not learner.training():
                        break
                    if not learner.step():
                        for worker in workers:
                            if worker.ready():
                                worker.fill_one()
                learner.wrap_up()
            except Stopped:
                learner.stopped = True
            finally:
                control.mark_done()
            for worker in workers:
                worker.park()
            control.mark_parked()
            learner.finish()
        finally:
            for worker in workers:
                worker.close()


class SerialRuntime(Runtime):
    """``infra.runtime=serial`` (see the module documentation)."""

    in_process = True

    def execute(self, run: RunState) -> None:
        """Train in this thread; a second stop signal interrupts the user's code here."""
        run.stop.in_user_code = True
        run.stop.on_request = run.memory.control.request_stop
        try:
            run_serial(run.memory, run.run_dir, run.worker_states, run.resume, run.events,
                       lambda: self._tick(run))
        finally:
            run.stop.on_request = None
            run.stop.in_user_code = False

    @staticmethod
    def _tick(run: RunState) -> None:
        """The look at the outside world, between the learner's steps: turn a stop
        request into the stop flag, end at once on a second signal, and keep the checkpoint
        evaluations going."""
        if run.stop.requested():
            run.memory.control.request_stop()
        if run.stop.forced:
            raise KeyboardInterrupt
        run.evals.poll()
