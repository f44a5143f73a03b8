"""The main process: creates shared memory, spawns learner and workers, watches them, and
unlinks every segment on every exit path."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastrl.config import MainConfig
from fastrl.learner.learner import LearnerSpec, run_learner
from fastrl.logging.metrics import MetricsLogger
from fastrl.memory.ring import ACT_NS, ENV_NS, FILL_NS, HEARTBEAT_NS, WRITE_SEQ, Ring
from fastrl.memory.segments import SegmentOwner, check_shm_space
from fastrl.memory.weights import SharedWeights
from fastrl.plan import SHM_KNOBS, plan_run
from fastrl.process import read_crash
from fastrl.rollout.worker import WorkerSpec, run_worker

STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
POLL_S = 0.05
GRACEFUL_EXIT_S = 30.0  # the learner may be evaluating and saving when asked to stop
KILL_WAIT_S = 5.0  # also the grace after a failure: a crashed run need not wait long
STARTUP_ALLOWANCE_S = 120.0  # before its first heartbeat a child imports torch, builds envs


class ChildFailed(RuntimeError):
    """A learner or worker process crashed or was killed; the message says which and why."""


@dataclass
class RunResult:
    """What a finished (or stopped) run produced."""

    run_dir: Path
    global_step: int
    eval: dict[str, float] | None
    wall_s: float  # whole run, process start-up and evaluations included
    steps_per_sec: float  # env steps/sec from the first learner update to the last
    stopped_by_signal: bool


class Supervisor:
    """Runs one training job described by ``cfg`` in ``run_dir``."""

    def __init__(self, cfg: MainConfig, run_dir: Path) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.error_dir = str(run_dir / "errors")
        self._ctx = mp.get_context("spawn")  # CUDA, OpenMP and numba threads do not survive fork
        self._signal: int | None = None
        self._stop_asked = False
        self._forced = False
        self._rings: list[Ring] = []
        self._procs: dict[str, mp.process.BaseProcess] = {}
        self._started_ns: dict[str, int] = {}

    # --- signals ---------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: Any) -> None:
        # Never raise here: a signal may land inside the cleanup in `run`'s finally block.
        if self._signal is None:
            self._signal = signum  # first SIGINT/SIGTERM: graceful stop
        else:
            self._forced = True  # any second one: stop waiting for anybody

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

    # --- run -------------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Train to the end, a stop signal, or the first child failure (raised).

        Raises KeyboardInterrupt after a second stop signal, once everything is cleaned up.
        """
        plan = plan_run(self.cfg)
        check_shm_space(plan.shm_bytes(), knobs=SHM_KNOBS)
        owner = SegmentOwner()
        logger = MetricsLogger(self.run_dir, self.cfg.log, self.cfg.algo.total_steps)
        metrics = self._ctx.Queue()
        t0 = time.monotonic()
        weights: SharedWeights | None = None
        with self._signals_handled():  # kept through the cleanup below
            try:
                rings = [owner.create(f"ring{i}", plan.ring_bytes)
                         for i in range(self.cfg.infra.num_workers)]
                weights_shm = owner.create("weights", plan.weights_bytes)
                weights = SharedWeights(weights_shm.buf, plan.num_params)
                parent = os.getpid()
                self._start("learner", run_learner, LearnerSpec(
                    plan, [r.name for r in rings], weights_shm.name, str(self.run_dir),
                    self.error_dir, parent), metrics)
                for i, ring in enumerate(rings):
                    self._start(f"worker {i}", run_worker, WorkerSpec(
                        plan, i, ring.name, weights_shm.name, self.error_dir, parent))
                self._rings = [Ring(r.buf, plan.layout, self.cfg.infra.ring_slots)
                               for r in rings]
                step, final = self._watch(weights, metrics, logger)
                grace = GRACEFUL_EXIT_S
            except BaseException:
                grace = KILL_WAIT_S
                raise
            finally:
                if weights is not None:
                    weights.request_stop()
                self._stop_children(grace)
                metrics.cancel_join_thread()
                metrics.close()
                self._rings = []
                owner.unlink_all()
                logger.close()
        if self._forced:
            raise KeyboardInterrupt
        return RunResult(self.run_dir, step, final.get("eval"), time.monotonic() - t0,
                         logger.steps_per_sec, self._signal is not None)

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
        self._procs[name] = proc
        self._started_ns[name] = time.monotonic_ns()

    def _watch(self, weights: SharedWeights, metrics, logger: MetricsLogger):
        """Forward metrics until the learner reports its result; raise :class:`ChildFailed`
        when a child crashes, hangs, or the run does not stop when asked."""
        step, final = 0, None
        stop_deadline = None
        while final is None:
            step, final = self._drain(metrics, logger, step, timeout=POLL_S)
            if self._forced:
                return step, final or {}
            if (self._signal is not None or self._stop_asked) and stop_deadline is None:
                weights.request_stop()
                stop_deadline = time.monotonic() + GRACEFUL_EXIT_S
            if stop_deadline is not None and time.monotonic() > stop_deadline:
                raise ChildFailed(f"the learner did not stop within {GRACEFUL_EXIT_S:.0f} s "
                                  "of the stop request; all processes were terminated")
            if final is None:
                step, final = self._check_children(weights, metrics, logger, step)
        return step, final

    def _check_children(self, weights, metrics, logger, step):
        """``(step, result)``: the learner's result once it exited cleanly (None before);
        raise on a crashed or hung child."""
        for name, proc in self._procs.items():
            code = proc.exitcode
            if code is None:
                if name == "learner":
                    self._check_heartbeat(name, proc, weights.last_beat(),
                                          self.cfg.infra.learner_timeout_s, "learner_timeout_s")
                else:
                    beat = self._rings[int(name.split()[1])].get(HEARTBEAT_NS)
                    self._check_heartbeat(name, proc, beat, self.cfg.infra.worker_timeout_s,
                                          "worker_timeout_s")
                continue
            if code == 0 and name != "learner" and weights.run_over():
                continue
            if code == 0 and name == "learner":
                # Its last messages may still be in the pipe.
                deadline = time.monotonic() + KILL_WAIT_S
                while time.monotonic() < deadline:
                    step, final = self._drain(metrics, logger, step, timeout=POLL_S)
                    if final is not None:
                        return step, final
                raise ChildFailed("the learner exited without reporting its result")
            raise ChildFailed(self._describe_exit(name, proc))
        return step, None

    def _check_heartbeat(self, name: str, proc, beat_ns: int, timeout_s: float,
                         key: str) -> None:
        if beat_ns == 0:  # still importing and building its envs
            silent_s = (time.monotonic_ns() - self._started_ns[name]) / 1e9
            if silent_s > max(timeout_s, STARTUP_ALLOWANCE_S):
                raise ChildFailed(f"{name} (pid {proc.pid}) did not start within "
                                  f"{silent_s:.0f} s")
            return
        silent_s = (time.monotonic_ns() - beat_ns) / 1e9
        if silent_s > timeout_s:
            raise ChildFailed(
                f"{name} (pid {proc.pid}) has not made progress for {silent_s:.0f} s "
                f"(infra.{key}={timeout_s:g}): is an env stuck in step() or reset()?"
            )

    def _drain(self, metrics, logger: MetricsLogger, step: int, timeout: float):
        """Log every queued message; returns the latest step and the final result (or None)."""
        final = None
        try:
            kind, step, payload = metrics.get(timeout=timeout)
            while True:
                if kind == "update":
                    logger.update(step, payload)
                elif kind == "eval":
                    logger.evaluation(step, payload)
                else:
                    final = payload
                kind, step, payload = metrics.get_nowait()
        except queue.Empty:
            pass
        return step, final

    def _describe_exit(self, name: str, proc) -> str:
        code = proc.exitcode
        if code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        elif code == 0:
            how = "exited before the run was stopped"
        else:
            how = f"exited with code {code}"
        report = read_crash(self.error_dir, name)
        msg = f"{name} (pid {proc.pid}) {how}"
        return f"{msg}:\n{report.rstrip()}" if report else msg

    def _stop_children(self, grace_s: float) -> None:
        """Let every child exit on the stop flag within ``grace_s`` (unless a second signal
        came), then kill what is left."""
        deadline = time.monotonic() + grace_s
        procs = list(self._procs.values())
        while any(p.is_alive() for p in procs) and not self._forced and \
                time.monotonic() < deadline:
            time.sleep(POLL_S)
        for p in procs:
            if p.is_alive():
                p.kill()  # children ignore SIGTERM (see fastrl.process.become_child)
        for p in procs:
            p.join(KILL_WAIT_S)
