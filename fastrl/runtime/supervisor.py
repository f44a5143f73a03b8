"""The main process of a run: plans it, creates its memory, has a runtime (local, serial
or Ray: :mod:`fastrl.runtime.base`) run the learner and the workers, turns signals into a
graceful stop, and unlinks every segment on every exit path.

Each job of the supervisor lives in a module of its own: stop requests
(:mod:`~fastrl.runtime.signals`), the rings and weights (:mod:`~fastrl.runtime.memory`),
the child processes (:mod:`~fastrl.runtime.children`), fault handling and restarts
(:mod:`~fastrl.runtime.faults`) and checkpoint evaluations
(:mod:`~fastrl.runtime.checkpoint_evals`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastrl.callbacks import Callback
from fastrl.checkpoint import PARKED, Checkpoint, checkpoints_dir, remove_stale_temps
from fastrl.config import MainConfig
from fastrl.core.files import DiskFull
from fastrl.memory.ring import ACT_NS, ENV_NS, FILL_NS, WRITE_SEQ
from fastrl.plan import RunPlan, plan_run
from fastrl.population.policy import member_results
from fastrl.runtime.base import RunState, Runtime
from fastrl.runtime.checkpoint_evals import CheckpointEvals
from fastrl.runtime.children import GRACEFUL_EXIT_S, KILL_WAIT_S, Children
from fastrl.runtime.faults import Watchdog
from fastrl.runtime.local import LocalRuntime
from fastrl.runtime.memory import RunMemory
from fastrl.runtime.periodic_evals import PeriodicEvals
from fastrl.runtime.ray_workers import RayRuntime
from fastrl.runtime.serial import SerialRuntime
from fastrl.runtime.signals import StopRequests
from fastrl.telemetry.events import RunEvents
from fastrl.telemetry.members_plot import plot_members
from fastrl.telemetry.metrics import MetricsLogger
from fastrl.tracking.tracking import Tracking

#: ``infra.runtime`` -> the runtime that runs it
RUNTIMES: dict[str, type[Runtime]] = {"local": LocalRuntime, "serial": SerialRuntime,
                                      "ray": RayRuntime}


@dataclass
class RunResult:
    """What a finished (or stopped) run produced."""

    run_dir: Path
    global_step: int
    eval: dict[str, float] | None  # the run's last evaluation (the solving one if solved)
    wall_s: float  # whole run, process start-up and evaluations included
    steps_per_sec: float  # env steps/sec from the first learner update to the last
    stopped_by_signal: bool  # a SIGINT/SIGTERM asked the run to stop
    restarts: int  # worker restarts during this run
    checkpoint: str | None  # the last checkpoint written
    metrics: dict[str, Any] = field(default_factory=dict)  # the last report (METRICS)
    timing: dict[str, dict[str, float]] = field(default_factory=dict)  # process: stage: s
    checkpoint_evals: dict[str, dict[str, float]] = field(default_factory=dict)  # by folder
    stopped: bool = False  # a stop request (signal, stop(), close(), a callback) cut it short

    @property
    def members(self) -> list[dict[str, float]]:
        """A population's last evaluation, member by member (``eval``'s ``member<k>/*``:
        ``members[k]["return_mean"]``, ...); [] for one member or no evaluation."""
        return member_results(self.eval or {})


class Supervisor:
    """Runs one training job described by ``cfg`` in ``run_dir``, from scratch or continuing
    from the checkpoint ``resume`` (which the caller checked with
    :func:`~fastrl.resume.check_resumable` against ``plan``, then reused here)."""

    def __init__(self, cfg: MainConfig, run_dir: Path, resume: Checkpoint | None = None,
                 plan: RunPlan | None = None, callbacks: Sequence[Callback] = (),
                 tracking: Tracking | None = None) -> None:
        self.cfg, self.run_dir, self.resume = cfg, run_dir, resume
        self.callbacks, self.tracking = callbacks, tracking
        self._plan = plan
        self._runtime = RUNTIMES[cfg.infra.runtime]()
        self._events: RunEvents | None = None
        self._stop = StopRequests(
            callback_failed=lambda: self._events is not None and self._events.error is not None)
        self._children = Children(run_dir)
        self._memory: RunMemory | None = None

    # --- for embedding programs (any thread) -------------------------------------------------
    def stop(self) -> None:
        """Ask the running job to stop gracefully, as a first SIGINT would."""
        self._stop.ask()

    def ring_counters(self) -> list[dict[str, int]]:
        """Per worker: slots published and the ns spent choosing actions, stepping envs and
        filling slots so far (empty before the rings exist)."""
        rings = self._memory.rings if self._memory is not None else []
        return [{"slots": r.get(WRITE_SEQ), "act_ns": r.get(ACT_NS), "env_ns": r.get(ENV_NS),
                 "fill_ns": r.get(FILL_NS)} for r in rings]

    def process_ids(self) -> dict[str, int | str]:
        """The pid of every child by role ('learner', 'worker 0', ...; a worker actor's once
        it has started, '?' before)."""
        return self._children.pids()

    def relay_counters(self) -> dict[str, int]:
        """infra.runtime=ray: slots relayed so far and the ns the relay spent getting them
        from the object store and copying them into the rings (empty for other runtimes)."""
        return self._runtime.relay_counters()

    # --- run -------------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Train to the end, a stop signal, or a failure the run cannot survive (raised).

        Raises KeyboardInterrupt after a second stop signal, and a callback's exception,
        once everything is cleaned up.
        """
        plan = self._plan = self._plan or plan_run(self.cfg)
        runtime, stop, children = self._runtime, self._stop, self._children
        memory = self._memory = RunMemory(plan, shared=not runtime.in_process)
        parked_dir = checkpoints_dir(self.run_dir) / PARKED
        shutil.rmtree(parked_dir, ignore_errors=True)  # states a crashed run left behind
        remove_stale_temps(self.run_dir)  # (and checkpoint writes it left half done)
        start_step = self.resume.global_step if self.resume else 0
        logger = MetricsLogger(self.run_dir, self.cfg.log, plan.cfg.algo.total_steps,
                               start_step, grouped=bool(plan.episode_groups),
                               tracking=self.tracking)
        watchdog = Watchdog(self.cfg, self.run_dir, memory, children, stopping=lambda: (
            memory.control.run_over() or stop.signal is not None or stop.asked))
        events = self._events = RunEvents(
            logger, self.callbacks, lambda: watchdog.health(not runtime.in_process), start_step,
            lambda: memory.control.learner_step() if memory.control is not None else 0)
        evals = CheckpointEvals(plan, self.run_dir, children, events, stop.requested,
                                lambda: stop.forced)
        periodic = PeriodicEvals(plan, str(self.run_dir), children, events, memory, watchdog)
        timing: dict[str, dict[str, float]] = {}
        t0 = time.monotonic()
        grace = KILL_WAIT_S  # a crashed run need not wait long
        failed = False
        if not runtime.in_process:
            # Before listening for a stop: starting the server sets the stop signals aside
            # for a moment, and one that comes then would be lost (fastrl.core.forkserver).
            children.parent_pid()
        with stop.handled():  # kept through the cleanup below
            try:
                memory.create()
                states = memory.restore(self.resume, self.run_dir) if self.resume else {}
                run = RunState(plan, self.run_dir, memory, events, stop, children, evals,
                               periodic, watchdog, states,
                               str(self.resume.path) if self.resume else None)
                runtime.execute(run)
                timing = runtime.timing(run)
                logger.timing(timing)
                evals.finish()
                grace = GRACEFUL_EXIT_S
            except BaseException:
                stop.in_user_code = False  # (a second signal must not interrupt the cleanup)
                grace = KILL_WAIT_S
                failed = True
                raise
            finally:
                stop.in_user_code = False
                if memory.control is not None:
                    memory.control.request_stop()
                children.stop_all(grace, lambda: stop.forced)
                children.clear()
                try:
                    runtime.close(logger, events.step)
                finally:
                    memory.release()
                    shutil.rmtree(parked_dir, ignore_errors=True)
                    # Last: on a full disk it raises DiskFull, which must not hide why
                    # a run that failed already failed.
                    with suppress(DiskFull) if failed else nullcontext():
                        logger.close()
        if stop.forced:
            raise KeyboardInterrupt
        if events.error is not None:
            # Its traceback holds the frames of this run (the queue among their locals): no
            # reference from here back to it, so that all of it goes as soon as the caller
            # lets the exception go, without waiting for the garbage collector.
            error, events.error = events.error, None
            try:
                raise error
            finally:
                error = None
        if plan.population is not None:  # (its episodes all written: the logs are closed)
            plot_members(self.run_dir, plan.population.size)
        final = events.final or {}
        return RunResult(self.run_dir, events.step, final.get("eval") or periodic.last,
                         time.monotonic() - t0,
                         logger.steps_per_sec, stop.signal is not None, watchdog.restarts,
                         events.last_checkpoint, events.last_metrics, timing,
                         dict(evals.results), bool(final.get("stopped")))
