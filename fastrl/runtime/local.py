"""``infra.runtime=local``: a learner process and one process per worker, over the run's
shared-memory rings; the supervisor's loop forwards the learner's metrics and watches them
all."""

from __future__ import annotations

import queue
import time

from fastrl.checkpoint import describe_latest
from fastrl.learner.learner import LearnerSpec, run_learner
from fastrl.memory.ring import INCARNATION
from fastrl.rollout.worker import WorkerSpec, run_worker
from fastrl.runtime.base import RunState, Runtime
from fastrl.runtime.children import GRACEFUL_EXIT_S, POLL_S
from fastrl.runtime.faults import ChildFailed
from fastrl.telemetry.metrics import MetricsLogger


class LocalRuntime(Runtime):
    """Learner and workers in processes of their own (``spawn``)."""

    def __init__(self) -> None:
        self.metrics = None  # the learner's queue of metrics messages

    def execute(self, run: RunState) -> None:
        """Start the learner and the workers, then watch them (:meth:`watch`)."""
        memory = run.memory
        self.metrics = run.children.ctx.Queue()
        run.children.spawn("learner", run_learner, LearnerSpec(
            run.plan, memory.ring_names, memory.weights_name, memory.control_name,
            str(run.run_dir),
            run.children.parent_pid(), run.resume, evaluate_elsewhere=True), self.metrics)
        for i in range(run.plan.cfg.infra.num_workers):
            self.start_worker(run, i, run.worker_states.get(i))
        self.watch(run)

    def start_worker(self, run: RunState, i: int, parked: str | None = None) -> None:
        """Start worker ``i`` on its ring, continuing from the parked state file ``parked``
        when given."""
        memory = run.memory
        run.children.spawn(f"worker {i}", run_worker, WorkerSpec(
            run.plan, i, memory.ring_names[i], memory.weights_name, memory.control_name,
            str(run.run_dir), run.children.parent_pid(), memory.rings[i].get_own(INCARNATION),
            parked))

    def watch(self, run: RunState) -> None:
        """Forward metrics until the learner reports its result; restart failed workers;
        evaluate checkpoints; raise :class:`ChildFailed` when the run cannot go on."""
        control, events = run.memory.control, run.events
        stop_deadline = None
        while events.final is None:
            self.drain(run, POLL_S)
            if run.stop.forced:
                return
            run.evals.poll()
            run.periodic.poll()
            if run.stop.requested() and stop_deadline is None:
                control.request_stop()
            if control.stop_requested() and stop_deadline is None:
                stop_deadline = time.monotonic() + GRACEFUL_EXIT_S
            if stop_deadline is not None and time.monotonic() > stop_deadline:
                failure = run.watchdog.failure
                raise ChildFailed(
                    (f"{failure}\n" if failure else "") +
                    f"the learner did not stop within {GRACEFUL_EXIT_S:.0f} s of the stop "
                    "request; all processes were terminated")
            if events.final is None:
                self.check_children(run)
        if run.watchdog.failure:
            raise ChildFailed(f"{run.watchdog.failure}\n{describe_latest(run.run_dir)}")

    def check_children(self, run: RunState) -> None:
        """Restart the workers that failed; raise when the learner did."""
        run.watchdog.check_workers(run.events.logger, run.events.now(),
                                   lambda i: self.start_worker(run, i))
        run.watchdog.check_learner(lambda timeout: self.drain(run, timeout),
                                   lambda: run.events.final is not None,
                                   lambda: run.events.disk_full)

    def drain(self, run: RunState, timeout: float) -> None:
        """Hand every queued message to the run's events (logger and callbacks), and the
        learner's requests for an evaluation to the periodic evaluations (its own ``eval``,
        of its last weights, ends them)."""
        try:
            message = self.metrics.get(timeout=timeout)
            while True:
                kind, step, payload = message
                if kind == "evaluate":
                    run.periodic.request(step, payload["params"])
                else:
                    if kind == "eval":
                        run.periodic.cancel()
                    run.events.put(message)
                message = self.metrics.get_nowait()
        except queue.Empty:
            pass

    def close(self, logger: MetricsLogger, step: int) -> None:
        """Close the metrics queue (its semaphores leave /dev/shm now)."""
        if self.metrics is not None:
            metrics, self.metrics = self.metrics, None
            metrics.cancel_join_thread()
            metrics.close()
