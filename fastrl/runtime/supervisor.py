"""The main process: creates shared memory, spawns learner and workers, restarts workers
that crash or hang, turns signals into a graceful stop, and unlinks every segment on every
exit path."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import queue
import shutil
import signal
import threading
import time
from collections import deque
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fastrl.callbacks import Callback
from fastrl.checkpoint import (
    PARKED,
    Checkpoint,
    checkpoints_dir,
    describe_latest,
    parked_path,
)
from fastrl.config import MainConfig
from fastrl.core.process import (
    STOP_SIGNALS,
    become_child,
    crash_report_path,
    read_crash,
    report_crash,
)
from fastrl.core.timing import timing_metrics
from fastrl.envs.source import EnvSource
from fastrl.eval.checkpoints import evaluate_checkpoint_to
from fastrl.learner.learner import LearnerSpec, ring_shape, run_learner
from fastrl.memory.ring import (
    ACT_NS,
    ENV_NS,
    FILL_NS,
    HEARTBEAT_NS,
    INCARNATION,
    STEPS,
    SYNC_NS,
    TERMINATE,
    VERSION_SEEN,
    WAIT_NS,
    WRITE_SEQ,
    Ring,
)
from fastrl.memory.segments import SegmentOwner, check_shm_space
from fastrl.memory.weights import SharedWeights
from fastrl.plan import SHM_KNOBS, RunPlan, plan_run
from fastrl.rollout.worker import EXIT_BROKEN_ENV, WorkerSpec, run_worker
from fastrl.runtime.ray_workers import RayWorkers
from fastrl.runtime.serial import run_serial
from fastrl.telemetry.events import RunEvents
from fastrl.telemetry.metrics import MetricsLogger

POLL_S = 0.05
# The learner may be evaluating, waiting up to PARK_WAIT_S (20 s) for the workers to park,
# and checkpointing when asked to stop.
GRACEFUL_EXIT_S = 60.0
KILL_WAIT_S = 5.0  # also the grace after a failure: a crashed run need not wait long
TERM_GRACE_S = 3.0  # a worker being restarted gets this long after SIGTERM before SIGKILL
STARTUP_ALLOWANCE_S = 120.0  # before its first heartbeat a child imports torch, builds envs
EVAL_DRAIN_S = 120.0  # at the end of a run, for the checkpoint evaluations still waiting


class ChildFailed(RuntimeError):
    """The learner failed, or workers failed more often than ``infra.max_restarts`` allows;
    the message says which process, why, and how to resume from the last checkpoint."""


@dataclass
class RunResult:
    """What a finished (or stopped) run produced."""

    run_dir: Path
    global_step: int
    eval: dict[str, float] | None  # the learner's last evaluation
    wall_s: float  # whole run, process start-up and evaluations included
    steps_per_sec: float  # env steps/sec from the first learner update to the last
    stopped_by_signal: bool  # a SIGINT/SIGTERM asked the run to stop
    restarts: int  # worker restarts during this run
    checkpoint: str | None  # the last checkpoint written
    metrics: dict[str, Any] = field(default_factory=dict)  # the last report (METRICS)
    timing: dict[str, dict[str, float]] = field(default_factory=dict)  # process: stage: s
    checkpoint_evals: dict[str, dict[str, float]] = field(default_factory=dict)  # by folder
    stopped: bool = False  # a stop request (signal, stop(), close(), a callback) cut it short


def worker_timing(ring: Ring) -> dict[str, float]:
    """Seconds a ring's worker spent per stage (fastrl.core.timing), from its counters."""
    return {"rollout": ring.get(FILL_NS) / 1e9, "sync_weights": ring.get(SYNC_NS) / 1e9,
            "waiting": ring.get(WAIT_NS) / 1e9}


def checkpoint_eval_path(run_dir: Path, checkpoint: str) -> Path:
    """Where the evaluation of a checkpoint folder goes: ``RUN_DIR/evals/<folder>.json``."""
    return Path(run_dir) / "evals" / f"{Path(checkpoint).name}.json"


def checkpoint_eval_summary(result: dict) -> dict[str, float]:
    """The flat statistics of a checkpoint evaluation's JSON (fastrl.eval)."""
    return {k: float(v) for k, v in result["summary"].items()}


def run_checkpoint_eval(parent_pid: int, checkpoint: str, out: str, env: EnvSource,
                        policy: Any) -> None:
    """Process entry point: evaluate one checkpoint (fastrl.eval) into ``out``, with the
    run's own env source and policy (which the run directory may not be able to rebuild)."""
    become_child(parent_pid)
    try:
        evaluate_checkpoint_to(checkpoint, out, env, policy)
    except BaseException as e:
        report_crash(str(Path(out).parent.parent), "eval", e)
        os._exit(1)


class Supervisor:
    """Runs one training job described by ``cfg`` in ``run_dir``, from scratch or continuing
    from the checkpoint ``resume`` (which the caller checked with
    :func:`~fastrl.checkpoint.check_resumable` against ``plan``, then reused here)."""

    def __init__(self, cfg: MainConfig, run_dir: Path, resume: Checkpoint | None = None,
                 plan: RunPlan | None = None, callbacks: Sequence[Callback] = ()) -> None:
        self.cfg = cfg
        self.callbacks = callbacks
        self.run_dir = run_dir
        self.resume = resume
        self._ctx = mp.get_context("spawn")  # CUDA, OpenMP and numba threads do not survive fork
        self._signal: int | None = None
        self._stop_asked = False
        self._forced = False
        self._plan = plan
        self._weights: SharedWeights | None = None
        self._ring_names: list[str] = []
        self._weights_name = ""
        self._rings: list[Ring] = []
        self._procs: dict[str, mp.process.BaseProcess] = {}
        self._started_ns: dict[str, int] = {}
        self._retired: set[str] = set()  # workers that ended for good (run over, given up)
        self._restart_times: deque[float] = deque()
        self._failure: str | None = None
        self.restarts = 0
        self._failures = 0  # worker faults, restarted or not
        self._events: RunEvents | None = None
        self._evals_started = 0  # checkpoints handed to an evaluation process so far
        self._evaluating: str | None = None  # the checkpoint being evaluated now
        self._in_user_code = False  # serial runtime: this thread runs envs and callbacks
        self._checkpoint_evals: dict[str, dict[str, float]] = {}
        self._ray: RayWorkers | None = None  # infra.runtime=ray: the actors and their relay

    # --- signals ---------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: Any) -> None:
        # Raise only while the serial runtime runs the user's code in this thread (an env or
        # a callback may never return to look at the flags): never inside the cleanup in
        # `run`'s finally block, which clears _in_user_code first.
        if self._signal is None:
            self._signal = signum  # first SIGINT/SIGTERM: graceful stop
        else:
            self._forced = True  # any second one: stop waiting for anybody
            if self._in_user_code:
                self._in_user_code = False
                raise KeyboardInterrupt

    @contextmanager
    def _signals_handled(self):
        if threading.current_thread() is not threading.main_thread():
            yield  # signal handlers can only be installed from the main thread
            return
        old = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        try:
            yield
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)

    # --- for embedding programs (any thread) -------------------------------------------------
    def stop(self) -> None:
        """Ask the running job to stop gracefully, as a first SIGINT would."""
        self._stop_asked = True

    def ring_counters(self) -> list[dict[str, int]]:
        """Per worker: slots published and the ns spent choosing actions, stepping envs and
        filling slots so far (empty before the rings exist)."""
        return [{"slots": r.get(WRITE_SEQ), "act_ns": r.get(ACT_NS), "env_ns": r.get(ENV_NS),
                 "fill_ns": r.get(FILL_NS)} for r in self._rings]

    def process_ids(self) -> dict[str, int | str]:
        """The pid of every child by role ('learner', 'worker 0', ...; a worker actor's once
        it has started, '?' before)."""
        return {name: proc.pid for name, proc in self._procs.items()}

    def relay_counters(self) -> dict[str, int]:
        """infra.runtime=ray: slots relayed so far and the ns the relay spent getting them
        from the object store and copying them into the rings (empty for other runtimes)."""
        return dict(self._ray.relay_ns) if self._ray is not None else {}

    # --- run -------------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Train to the end, a stop signal, or a failure the run cannot survive (raised).

        Raises KeyboardInterrupt after a second stop signal, and a callback's exception,
        once everything is cleaned up.
        """
        plan = self._plan = self._plan or plan_run(self.cfg)
        serial = self.cfg.infra.runtime == "serial"
        if not serial:  # (serial keeps its rings in process memory)
            check_shm_space(plan.shm_bytes(), knobs=SHM_KNOBS)
        parked_dir = checkpoints_dir(self.run_dir) / PARKED
        shutil.rmtree(parked_dir, ignore_errors=True)  # states a crashed run left behind
        owner = SegmentOwner()
        start_step = self.resume.global_step if self.resume else 0
        logger = MetricsLogger(self.run_dir, self.cfg.log, self.cfg.algo.total_steps,
                               start_step)
        events = self._events = RunEvents(logger, self.callbacks, self._health, start_step)
        metrics = None if serial else self._ctx.Queue()
        timing: dict[str, dict[str, float]] = {}
        t0 = time.monotonic()
        with self._signals_handled():  # kept through the cleanup below
            try:
                self._make_memory(owner, serial)
                if self.cfg.infra.runtime == "ray":
                    self._ray = RayWorkers(plan, self.run_dir, self._rings, self._weights,
                                           self._stop_requested)
                worker_states = self._restore_rings() if self.resume else {}
                resume = str(self.resume.path) if self.resume else None
                if serial:
                    self._in_user_code = True
                    run_serial(plan, self.run_dir, self._rings, self._weights, worker_states,
                               resume, events, self._serial_tick)
                    self._in_user_code = False
                else:
                    self._start("learner", run_learner, LearnerSpec(
                        plan, self._ring_names, self._weights_name, str(self.run_dir),
                        os.getpid(), resume), metrics)
                    for i in range(self.cfg.infra.num_workers):
                        self._start_worker(i, worker_states.get(i))
                    self._watch(metrics)
                timing = self._timing_table(serial)
                logger.timing(timing)
                self._finish_checkpoint_evals()
                grace = GRACEFUL_EXIT_S
            except BaseException:
                self._in_user_code = False
                grace = KILL_WAIT_S
                raise
            finally:
                self._in_user_code = False
                if self._weights is not None:
                    self._weights.request_stop()
                self._stop_children(grace)
                self._close_ray(logger)  # (its relay writes the rings: before the unlink)
                # An exception's traceback keeps this frame and the processes (their args
                # hold the queue) alive: drop them, so that the queue's semaphores leave
                # /dev/shm now rather than whenever the traceback is collected.
                self._procs.clear()
                if metrics is not None:
                    metrics.cancel_join_thread()
                    metrics.close()
                    metrics = None
                self._rings = []
                self._weights = None
                owner.unlink_all()
                logger.close()
                shutil.rmtree(parked_dir, ignore_errors=True)
        if self._forced:
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
        final = events.final or {}
        return RunResult(self.run_dir, events.step, final.get("eval"), time.monotonic() - t0,
                         logger.steps_per_sec, self._signal is not None,
                         self.restarts, events.last_checkpoint, events.last_metrics, timing,
                         dict(self._checkpoint_evals), bool(final.get("stopped")))

    def _make_memory(self, owner: SegmentOwner, serial: bool) -> None:
        """The rings and the weights: shared-memory segments, or for the serial runtime
        plain process memory (the same classes work on any buffer)."""
        plan, n = self._plan, self.cfg.infra.num_workers
        if serial:
            rings = [memoryview(bytearray(plan.ring_bytes)) for _ in range(n)]
            weights = memoryview(bytearray(plan.weights_bytes))
        else:
            segments = [owner.create(f"ring{i}", plan.ring_bytes) for i in range(n)]
            self._ring_names = [r.name for r in segments]
            rings = [r.buf for r in segments]
            weights_shm = owner.create("weights", plan.weights_bytes)
            self._weights_name = weights_shm.name
            weights = weights_shm.buf
        self._rings = [Ring(buf, plan.layout, self.cfg.infra.ring_slots) for buf in rings]
        self._weights = SharedWeights(weights, plan.num_params)

    def _close_ray(self, logger: MetricsLogger) -> None:
        """End the Ray side of the run (never raises: a cluster that went away must not keep
        the shared memory from being released)."""
        if self._ray is None:
            return
        ray_workers, self._ray = self._ray, None
        try:
            ray_workers.close()
        except Exception as e:
            logger.event(self._events.step, f"closing the Ray runtime failed: {e!r}")

    def _stop_requested(self) -> bool:
        """A signal, :meth:`stop` or a failed callback asked the run to stop."""
        return self._signal is not None or self._stop_asked or self._events.error is not None \
            or self._forced

    def _serial_tick(self) -> None:
        """The serial runtime's look at the outside world, from inside the learner's waits:
        turn a stop request into the stop flag, end at once on a second signal, and keep the
        checkpoint evaluations going."""
        if self._stop_requested():
            self._weights.request_stop()
        if self._forced:
            raise KeyboardInterrupt
        self._poll_checkpoint_evals()

    def _timing_table(self, serial: bool) -> dict[str, dict[str, float]]:
        """Seconds per stage of every process (fastrl.core.timing): the learner's from its last
        message, each worker's from its ring's counters."""
        final = self._events.final or {}
        table = {("serial" if serial else "learner"): final.get("timing", {})}
        if not serial:
            for i, ring in enumerate(self._rings):
                table[f"worker {i}"] = worker_timing(ring)
        return table if table.get("serial", table.get("learner")) else {}

    def _restore_rings(self) -> dict[int, str]:
        """Put the checkpoint's unread slots back into the new rings and set each ring's
        incarnation; returns the parked worker states to continue from, by worker.

        Slots and worker states are used only when the ring shape and env arguments are
        those of the checkpoint; otherwise every worker starts fresh episodes with new seeds.
        """
        manifest, plan = self.resume.manifest, self._plan
        incarnations = manifest["worker_incarnations"]
        same = manifest["rings"] == ring_shape(self.cfg, plan.layout.nbytes)
        states = {}
        with np.load(self.resume.file("rings.npz"), allow_pickle=False) as saved:
            for i, ring in enumerate(self._rings):
                # Each worker's step count goes on from the run's (DQN's epsilon follows it).
                ring.set(STEPS, self.resume.global_step // len(self._rings))
                if same:
                    read_seq, write_seq = saved[f"seqs{i}"].tolist()
                    ring.restore(read_seq, write_seq, saved[f"slots{i}"])
                    state = self.resume.file(f"worker-{i}.pkl")
                    if state is not None:
                        # A private copy: checkpoint retention may delete the folder before
                        # the worker has read it.
                        states[i] = str(parked_path(self.run_dir, i, -1))
                        Path(states[i]).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(state, states[i])
                    ring.set(INCARNATION, incarnations[i] + (state is None))
                else:
                    version = manifest["updates"]
                    ring.restore(version, version, np.empty((0, plan.layout.nbytes), np.uint8))
                    ring.set(INCARNATION, max(incarnations, default=0) + 1)
        return states

    def _start(self, name: str, target, *args) -> None:
        # A terminal's Ctrl-C (or a group SIGTERM) reaches every process of the group, and a
        # child still importing torch would die of it. A child inherits the forking thread's
        # signal mask, so it starts with both blocked until it ignores them (become_child);
        # here they stay pending, or another thread's handler takes them: none is lost.
        old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            proc = self._ctx.Process(target=target, args=args, name=f"fastrl {name}",
                                     daemon=True)
            proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        self._track(name, proc)

    def _track(self, name: str, proc) -> None:
        """Watch ``proc`` (a process, or a worker actor's handle) as child ``name``."""
        self._procs[name] = proc
        self._started_ns[name] = time.monotonic_ns()

    def _start_worker(self, i: int, resume_state: str | None = None) -> None:
        ring = self._rings[i]
        if self._ray is not None:
            self._track(f"worker {i}", self._ray.start_worker(i, ring.get(INCARNATION),
                                                               resume_state))
            return
        self._start(f"worker {i}", run_worker, WorkerSpec(
            self._plan, i, self._ring_names[i], self._weights_name,
            str(self.run_dir), os.getpid(), ring.get(INCARNATION), resume_state))

    # --- watching --------------------------------------------------------------------------
    def _watch(self, metrics) -> None:
        """Forward metrics until the learner reports its result; restart failed workers;
        evaluate checkpoints; raise :class:`ChildFailed` when the run cannot go on."""
        weights, events, logger = self._weights, self._events, self._events.logger
        stop_deadline = None
        while events.final is None:
            self._drain(metrics, timeout=POLL_S)
            if self._forced:
                return
            self._poll_checkpoint_evals()
            if self._stop_requested() and stop_deadline is None:
                weights.request_stop()
            if weights.stop_requested() and stop_deadline is None:
                stop_deadline = time.monotonic() + GRACEFUL_EXIT_S
            if stop_deadline is not None and time.monotonic() > stop_deadline:
                raise ChildFailed(
                    (f"{self._failure}\n" if self._failure else "") +
                    f"the learner did not stop within {GRACEFUL_EXIT_S:.0f} s of the stop "
                    "request; all processes were terminated")
            if events.final is None:
                self._check_workers(logger, events.step)
                self._check_learner(metrics)
        if self._failure:
            raise ChildFailed(f"{self._failure}\n{describe_latest(self.run_dir)}")

    def _stopping(self) -> bool:
        """True once the run is over or a stop was asked for (even if not yet flagged)."""
        return self._weights.run_over() or self._signal is not None or self._stop_asked

    def _check_learner(self, metrics) -> None:
        """Return while the learner runs or once it reported its result and exited cleanly;
        raise when it crashed or hangs."""
        proc = self._procs["learner"]
        code = proc.exitcode
        if code is None:
            fault = self._heartbeat_fault("learner", self._weights.last_beat(),
                                          self.cfg.infra.learner_timeout_s, "learner_timeout_s")
            if fault is None:
                return
        elif code == 0:
            # Its last messages may still be in the pipe.
            deadline = time.monotonic() + KILL_WAIT_S
            while time.monotonic() < deadline:
                self._drain(metrics, timeout=POLL_S)
                if self._events.final is not None:
                    return
            fault = "the learner exited without reporting its result"
        else:
            fault = self._describe_exit("learner", proc)
        raise ChildFailed(f"{fault}\nThe run stopped. {describe_latest(self.run_dir)}")

    def _check_workers(self, logger: MetricsLogger, step: int) -> None:
        """Restart every worker that crashed, exited early or hangs; retire those that
        ended with the run; mark the workers parked once none runs after the run is over."""
        if self._ray is not None and self._ray.failure is not None:
            raise ChildFailed(f"the Ray relay thread failed: {self._ray.failure!r}\n"
                              f"{describe_latest(self.run_dir)}")
        for i in range(self.cfg.infra.num_workers):
            name = f"worker {i}"
            if name in self._retired:
                continue
            proc = self._procs[name]
            if proc.exitcode == 0 and self._weights.run_over():  # exit code first: no race
                self._retired.add(name)
                continue
            fault = self._worker_fault(i, proc)
            if fault is not None:
                self._replace_worker(i, fault, logger, step)
        for actor in self._ray.take_started() if self._ray is not None else ():
            logger.event(step, f"worker {actor.worker_id} started on {actor.node} (Ray actor "
                         f"pid {actor.pid})")
        if self._weights.run_over() and len(self._retired) == self.cfg.infra.num_workers \
                and not self._weights.parked():
            self._weights.mark_parked()

    def _worker_fault(self, i: int, proc) -> str | None:
        """Why worker ``i`` must be replaced, or None while it is healthy."""
        name = f"worker {i}"
        if proc.exitcode is not None:
            return self._describe_exit(name, proc)
        return self._heartbeat_fault(name, self._rings[i].get(HEARTBEAT_NS),
                                     self.cfg.infra.worker_timeout_s, "worker_timeout_s")

    def _heartbeat_fault(self, name: str, beat_ns: int, timeout_s: float,
                         key: str) -> str | None:
        pid = self._procs[name].pid
        if beat_ns == 0:  # still importing and building its envs
            silent_s = (time.monotonic_ns() - self._started_ns[name]) / 1e9
            if silent_s > max(timeout_s, STARTUP_ALLOWANCE_S):
                return f"{name} (pid {pid}) did not start within {silent_s:.0f} s"
            return None
        silent_s = (time.monotonic_ns() - beat_ns) / 1e9
        if silent_s > timeout_s:
            return (f"{name} (pid {pid}) has not made progress for {silent_s:.0f} s "
                    f"(infra.{key}={timeout_s:g}): is an env stuck in step() or reset()?")
        return None

    def _replace_worker(self, i: int, fault: str, logger: MetricsLogger, step: int) -> None:
        """End worker ``i`` and start a new one on the same ring with fresh env seeds, unless
        the run is over or the restart budget of the window is spent (then stop the run)."""
        name, ring, infra = f"worker {i}", self._rings[i], self.cfg.infra
        broken_env = self._procs[name].exitcode == EXIT_BROKEN_ENV
        self._end_worker(i)
        report = self._archive_crash(name)
        if self._stopping():  # stopping anyway: the learner needs no more data
            self._retired.add(name)
            logger.event(step, f"{fault}; not restarted, the run is ending")
            return
        if broken_env:  # fastrl's own env check failed: every incarnation would fail alike
            self._give_up(name, f"{fault}: not restarted, the env itself is at fault\n{report}",
                          logger, step, f"{fault}; the env breaks its contract: stopping the run")
            return
        now = time.monotonic()
        self._restart_times.append(now)
        while now - self._restart_times[0] > infra.restart_window_s:
            self._restart_times.popleft()
        if len(self._restart_times) > infra.max_restarts:
            self._give_up(name, (
                f"{len(self._restart_times)} worker failures within {infra.restart_window_s:g} "
                f"s (infra.max_restarts={infra.max_restarts}); the last: {fault}"
                + (f"\n{report.rstrip()}" if report else "")),
                logger, step, f"{fault}; giving up: too many restarts, stopping the run")
            return
        ring.set(INCARNATION, ring.get(INCARNATION) + 1)
        ring.set(HEARTBEAT_NS, 0)  # the new worker gets the start-up allowance
        ring.set(TERMINATE, 0)
        self._start_worker(i)
        self.restarts += 1
        last_line = report.strip().splitlines()[-1] if report else ""
        logger.event(step, f"restart {self.restarts}: {fault}" +
                     (f" [{last_line}]" if last_line and last_line not in fault else "") +
                     f"; started {name} again (pid {self._procs[name].pid}, incarnation "
                     f"{ring.get(INCARNATION)})", detail=report)

    def _give_up(self, name: str, failure: str, logger: MetricsLogger, step: int,
                 event: str) -> None:
        """Retire worker ``name`` and stop the run; ``failure`` becomes the run's error."""
        self._retired.add(name)
        self._failure = failure
        logger.event(step, event)
        self._weights.request_stop()

    def _end_worker(self, i: int) -> None:
        """SIGTERM (which a worker obeys only when its ring's TERMINATE word is set), then
        SIGKILL after TERM_GRACE_S; returns once the process is gone."""
        proc = self._procs[f"worker {i}"]
        if proc.exitcode is None:
            self._rings[i].set(TERMINATE, 1)
            proc.terminate()
            proc.join(TERM_GRACE_S)
            if proc.exitcode is None:
                proc.kill()
                proc.join(KILL_WAIT_S)
        if proc.exitcode is None:
            raise ChildFailed(f"worker {i} (pid {proc.pid}) survived SIGKILL for "
                              f"{KILL_WAIT_S:g} s; its ring cannot be reused")

    def _archive_crash(self, name: str) -> str | None:
        """Move a replaced worker's crash report aside (``worker-1.failure-3.txt``: the run's
        third worker failure), so the next failure writes its own; returns the report."""
        self._failures += 1
        report = read_crash(self.run_dir, name)
        if report is not None:
            path = crash_report_path(self.run_dir, name)
            path.rename(path.with_suffix(f".failure-{self._failures}.txt"))
        return report

    def _health(self) -> dict[str, float]:
        """Supervisor scalars logged with every update."""
        now = time.monotonic_ns()
        live = [r for i, r in enumerate(self._rings) if f"worker {i}" not in self._retired]
        beats = [r.get(HEARTBEAT_NS) for r in live]
        ages = [(now - b) / 1e9 for b in beats if b]
        seen = [r.get(VERSION_SEEN) for r in live]
        health = {
            "supervisor/restarts": self.restarts,
            "supervisor/heartbeat_age_max_s": max(ages, default=0.0),
            "supervisor/worker_lag_max": self._weights.version() - min(seen, default=0),
        }
        if self.cfg.infra.runtime != "serial" and self._rings:  # (serial: one timer)
            per_worker = [worker_timing(r) for r in self._rings]
            health.update(timing_metrics("workers", {
                stage: sum(t[stage] for t in per_worker) / len(per_worker)
                for stage in per_worker[0]}))
        return health

    def _drain(self, metrics, timeout: float) -> None:
        """Hand every queued message to the run's events (logger and callbacks)."""
        try:
            message = metrics.get(timeout=timeout)
            while True:
                self._events.put(message)
                message = metrics.get_nowait()
        except queue.Empty:
            pass

    # --- evaluating checkpoints in their own process (log.eval_on_checkpoint) --------------
    def _poll_checkpoint_evals(self) -> None:
        """Log the result of a finished checkpoint evaluation; start the next one."""
        if not self.cfg.log.eval_on_checkpoint:
            return
        proc = self._procs.get("eval")
        if proc is not None and proc.exitcode is None:
            return
        if proc is not None and self._evaluating is not None:
            self._log_checkpoint_eval(self._evaluating, proc)
            self._evaluating = None
        written = self._events.checkpoints
        while self._evals_started < len(written) and not self._forced:
            checkpoint = written[self._evals_started]
            self._evals_started += 1
            if not Path(checkpoint).is_dir():  # rotated out (log.keep_checkpoints) meanwhile
                self._events.logger.event(self._events.step, f"{checkpoint} was deleted "
                                          "before it could be evaluated (log.keep_checkpoints)")
                continue
            self._evaluating = checkpoint
            self._start("eval", run_checkpoint_eval, os.getpid(), checkpoint,
                        str(checkpoint_eval_path(self.run_dir, checkpoint)), self._plan.env,
                        self._plan.policy_spec)
            return

    def _log_checkpoint_eval(self, checkpoint: str, proc) -> None:
        out = checkpoint_eval_path(self.run_dir, checkpoint)
        step = self._events.step
        if proc.exitcode != 0 or not out.is_file():
            report = read_crash(self.run_dir, "eval") or ""
            self._events.logger.event(step, f"the evaluation of {checkpoint} failed "
                                      f"({self._describe_exit('eval', proc)})",
                                      detail=report)
            return
        result = json.loads(out.read_text())
        summary = checkpoint_eval_summary(result)
        self._checkpoint_evals[Path(checkpoint).name] = summary
        self._events.evaluation(int(result["global_step"]), summary, checkpoint)

    def _finish_checkpoint_evals(self) -> None:
        """At the end of a run that was not interrupted, evaluate the checkpoints still
        waiting (up to EVAL_DRAIN_S) so that the last one is in the logs too."""
        if not self.cfg.log.eval_on_checkpoint:
            return
        deadline = time.monotonic() + EVAL_DRAIN_S
        while (self._evaluating is not None or
               self._evals_started < len(self._events.checkpoints)) and \
                not self._stop_requested() and time.monotonic() < deadline:
            self._poll_checkpoint_evals()
            time.sleep(POLL_S)

    def _describe_exit(self, name: str, proc) -> str:
        code = proc.exitcode
        if code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        elif code == 0:
            how = "exited before the run was stopped"
        else:
            how = f"exited with code {code}"
        report = read_crash(self.run_dir, name)
        msg = f"{name} (pid {proc.pid}) {how}"
        return f"{msg}:\n{report.rstrip()}" if report and name == "learner" else msg

    def _stop_children(self, grace_s: float) -> None:
        """Let every child exit on the stop flag within ``grace_s`` (unless a second signal
        came), then kill what is left. A checkpoint evaluation still running is killed at
        once: it does not look at the stop flag, and its JSON appears atomically or not."""
        evaluating = self._procs.get("eval")
        if evaluating is not None and evaluating.is_alive():
            evaluating.kill()
        deadline = time.monotonic() + grace_s
        procs = list(self._procs.values())
        while any(p.is_alive() for p in procs) and not self._forced and \
                time.monotonic() < deadline:
            time.sleep(POLL_S)
        for p in procs:
            if p.is_alive():
                p.kill()  # children ignore SIGTERM (see fastrl.core.process.become_child)
        for p in procs:
            p.join(KILL_WAIT_S)
