"""The main process: creates shared memory, spawns learner and workers, watches them, and
unlinks every segment on every exit path."""

from __future__ import annotations

import multiprocessing as mp
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
from fastrl.memory.segments import SegmentOwner, check_shm_space
from fastrl.memory.weights import SharedWeights
from fastrl.plan import SHM_KNOBS, plan_run
from fastrl.process import read_crash
from fastrl.rollout.worker import WorkerSpec, run_worker

POLL_S = 0.05
GRACEFUL_EXIT_S = 30.0  # the learner may be evaluating and saving when asked to stop
KILL_WAIT_S = 5.0


class ChildFailed(RuntimeError):
    """A learner or worker process crashed or was killed; the message says which and why."""


@dataclass
class RunResult:
    """What a finished (or stopped) run produced."""

    run_dir: Path
    global_step: int
    eval: dict[str, float] | None
    wall_s: float
    steps_per_sec: float
    stopped_by_signal: bool


class Supervisor:
    """Runs one training job described by ``cfg`` in ``run_dir``."""

    def __init__(self, cfg: MainConfig, run_dir: Path) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.error_dir = str(run_dir / "errors")
        self._signal: int | None = None
        self._procs: dict[str, mp.process.BaseProcess] = {}

    # --- signals ---------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._signal is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # second Ctrl-C: stop now; `finally` still cleans up
        self._signal = signum

    @contextmanager
    def _signals_handled(self):
        if threading.current_thread() is not threading.main_thread():
            yield  # signal handlers can only be installed from the main thread
            return
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)

    # --- run -------------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Train to the end, a stop signal, or the first child failure (raised)."""
        plan = plan_run(self.cfg)
        check_shm_space(plan.shm_bytes(), knobs=SHM_KNOBS)
        owner = SegmentOwner()
        logger = MetricsLogger(self.run_dir, self.cfg.log, self.cfg.algo.total_steps)
        ctx = mp.get_context(self.cfg.infra.start_method)
        metrics = ctx.Queue()
        t0 = time.monotonic()
        weights: SharedWeights | None = None
        graceful = True
        try:
            with self._signals_handled():
                rings = [owner.create(f"ring{i}", plan.ring_bytes)
                         for i in range(self.cfg.infra.num_workers)]
                weights_shm = owner.create("weights", plan.weights_bytes)
                weights = SharedWeights(weights_shm.buf, plan.num_params)
                parent = mp.current_process().pid
                self._start(ctx, "learner", run_learner, LearnerSpec(
                    plan, [r.name for r in rings], weights_shm.name, str(self.run_dir),
                    self.error_dir, parent), metrics)
                for i, ring in enumerate(rings):
                    self._start(ctx, f"worker {i}", run_worker, WorkerSpec(
                        plan, i, ring.name, weights_shm.name, self.error_dir, parent))
                step, final = self._watch(weights, metrics, logger)
        except KeyboardInterrupt:
            graceful = False  # a second Ctrl-C: no more waiting
            raise
        finally:
            if weights is not None:
                weights.request_stop()
            self._stop_children(graceful)
            metrics.cancel_join_thread()
            metrics.close()
            owner.unlink_all()
            logger.close()
        wall = time.monotonic() - t0
        return RunResult(self.run_dir, step, final.get("eval"), wall, step / wall,
                         self._signal is not None)

    def _start(self, ctx, name: str, target, *args) -> None:
        proc = ctx.Process(target=target, args=args, name=f"fastrl {name}", daemon=True)
        proc.start()
        self._procs[name] = proc

    def _watch(self, weights: SharedWeights, metrics, logger: MetricsLogger):
        """Forward metrics until the learner finishes; raise :class:`ChildFailed` on a crash."""
        step, final = 0, None
        while final is None:
            step, final = self._drain(metrics, logger, step, timeout=POLL_S)
            if self._signal is not None:
                weights.request_stop()
            for name, proc in self._procs.items():
                code = proc.exitcode
                if code is None or (code == 0 and name != "learner" and
                                    weights.stop_requested()):
                    continue
                if code == 0 and name == "learner":
                    # The learner's last messages may still be in the pipe.
                    deadline = time.monotonic() + KILL_WAIT_S
                    while final is None and time.monotonic() < deadline:
                        step, final = self._drain(metrics, logger, step, timeout=POLL_S)
                    if final is None:
                        raise ChildFailed("the learner exited without reporting its result")
                    break
                raise ChildFailed(self._describe_exit(name, proc))
        return step, final

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
        trace = read_crash(self.error_dir, name)
        msg = f"{name} (pid {proc.pid}) {how}"
        return f"{msg}:\n{trace.rstrip()}" if trace else msg

    def _stop_children(self, graceful: bool) -> None:
        """Give every child a moment to exit on the stop flag, then terminate, then kill."""
        deadline = time.monotonic() + (GRACEFUL_EXIT_S if graceful else 0.0)
        for proc in self._procs.values():
            proc.join(max(0.0, deadline - time.monotonic()))
        for proc in self._procs.values():
            if proc.is_alive():
                proc.terminate()
        for proc in self._procs.values():
            proc.join(KILL_WAIT_S)
            if proc.is_alive():
                proc.kill()
                proc.join(KILL_WAIT_S)
