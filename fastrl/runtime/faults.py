"""Fault handling: heartbeats, worker restarts within a budget, learner failures, and the
health scalars that show them."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from fastrl.checkpoint import describe_latest
from fastrl.config import MainConfig
from fastrl.core.files import FREE_SPACE
from fastrl.core.process import EXIT_DISK_FULL, crash_report_path, read_crash
from fastrl.core.timing import JIT, timing_metrics
from fastrl.memory.ring import (
    FILL_NS,
    HEARTBEAT_NS,
    INCARNATION,
    JIT_NS,
    SYNC_NS,
    TERMINATE,
    VERSION_SEEN,
    WAIT_NS,
    Ring,
)
from fastrl.rollout.worker import EXIT_BROKEN_ENV
from fastrl.runtime.children import KILL_WAIT_S, POLL_S, Children
from fastrl.runtime.memory import RunMemory
from fastrl.telemetry.metrics import MetricsLogger

TERM_GRACE_S = 3.0  # a worker being restarted gets this long after SIGTERM before SIGKILL
STARTUP_ALLOWANCE_S = 120.0  # before its first heartbeat a child imports torch, builds envs


class ChildFailed(RuntimeError):
    """The learner failed, or workers failed more often than ``infra.max_restarts`` allows;
    the message says which process, why, and how to resume from the last checkpoint."""


def worker_timing(ring: Ring) -> dict[str, float]:
    """Seconds a ring's worker spent per stage (fastrl.core.timing), from its counters."""
    return {"rollout": ring.get(FILL_NS) / 1e9, "sync_weights": ring.get(SYNC_NS) / 1e9,
            "waiting": ring.get(WAIT_NS) / 1e9, JIT: ring.get(JIT_NS) / 1e9}


class Watchdog:
    """Watches the learner and the workers of a run: restarts every worker that crashed,
    exited early or hangs (within ``infra.max_restarts`` per ``infra.restart_window_s``),
    retires the workers that ended with the run, and raises :class:`ChildFailed` when the
    run cannot go on. ``stopping()`` says the run is ending anyway."""

    def __init__(self, cfg: MainConfig, run_dir: Path, memory: RunMemory, children: Children,
                 stopping: Callable[[], bool]) -> None:
        self.cfg, self.run_dir, self.memory, self.children = cfg, run_dir, memory, children
        self.stopping = stopping
        self.restarts = 0
        self.failures = 0  # worker faults, restarted or not
        self.retired: set[str] = set()  # workers that ended for good (run over, given up)
        self.restart_times: deque[float] = deque()
        self.failure: str | None = None  # why the run must stop, once a worker gave up

    # --- the learner -------------------------------------------------------------------------
    def check_learner(self, drain: Callable[[float], None], reported: Callable[[], bool],
                      disk_full: Callable[[], str | None] = lambda: None) -> None:
        """Return while the learner runs, or once it ``reported()`` its result and exited
        cleanly (``drain(timeout)`` takes its last messages); raise when it crashed or
        hangs. ``disk_full()`` is what the learner said it could not write, if it said."""
        proc = self.children["learner"]
        code = proc.exitcode
        if code is None:
            fault = self.heartbeat_fault("learner", self.memory.control.last_beat(),
                                         self.cfg.infra.learner_timeout_s, "learner_timeout_s")
            if fault is None:
                return
        elif code == 0:
            # Its last messages may still be in the pipe.
            deadline = time.monotonic() + KILL_WAIT_S
            while time.monotonic() < deadline:
                drain(POLL_S)
                if reported():
                    return
            fault = "the learner exited without reporting its result"
        elif code == EXIT_DISK_FULL:  # one line: what could not be written, what is intact
            drain(POLL_S)  # (its last message says what, where the disk had no room for it)
            raise ChildFailed(f"{disk_full() or self.children.disk_full('learner')}. "
                              f"{describe_latest(self.run_dir, FREE_SPACE)}")
        else:
            fault = self.children.describe_exit("learner")
        raise ChildFailed(f"{fault}\nThe run stopped. {describe_latest(self.run_dir)}")

    # --- the workers -------------------------------------------------------------------------
    def check_workers(self, logger: MetricsLogger, step: int,
                      start_worker: Callable[[int], None]) -> None:
        """Restart every worker that crashed, exited early or hangs (``start_worker(i)``
        starts worker ``i`` again on its ring); retire those that ended with the run; mark
        the workers parked once none runs after the run is over."""
        control, n = self.memory.control, self.cfg.infra.num_workers
        for i in range(n):
            name = f"worker {i}"
            if name in self.retired:
                continue
            proc = self.children[name]
            if proc.exitcode == 0 and control.run_over():  # exit code first: no race
                self.retired.add(name)
                continue
            fault = self.worker_fault(i)
            if fault is not None:
                self.replace_worker(i, fault, logger, step, start_worker)
        if control.run_over() and len(self.retired) == n and not control.parked():
            control.mark_parked()

    def worker_fault(self, i: int) -> str | None:
        """Why worker ``i`` must be replaced, or None while it is healthy."""
        name = f"worker {i}"
        if self.children[name].exitcode is not None:
            return self.children.describe_exit(name)
        return self.heartbeat_fault(name, self.memory.rings[i].get(HEARTBEAT_NS),
                                    self.cfg.infra.worker_timeout_s, "worker_timeout_s")

    def heartbeat_fault(self, name: str, beat_ns: int, timeout_s: float,
                        key: str) -> str | None:
        """Why child ``name``, last beating at ``beat_ns``, counts as hung, or None."""
        pid = self.children[name].pid
        if beat_ns == 0:  # still importing and building its envs
            silent_s = (time.monotonic_ns() - self.children.started_ns[name]) / 1e9
            if silent_s > max(timeout_s, STARTUP_ALLOWANCE_S):
                return f"{name} (pid {pid}) did not start within {silent_s:.0f} s"
            return None
        silent_s = (time.monotonic_ns() - beat_ns) / 1e9
        if silent_s > timeout_s:
            return (f"{name} (pid {pid}) has not made progress for {silent_s:.0f} s "
                    f"(infra.{key}={timeout_s:g}): is an env stuck in step() or reset()?")
        return None

    def replace_worker(self, i: int, fault: str, logger: MetricsLogger, step: int,
                       start_worker: Callable[[int], None]) -> None:
        """End worker ``i`` and start a new one on the same ring with fresh env seeds, unless
        the run is over or the restart budget of the window is spent (then stop the run)."""
        name, ring, infra = f"worker {i}", self.memory.rings[i], self.cfg.infra
        broken_env = self.children[name].exitcode == EXIT_BROKEN_ENV
        self.end_worker(i)
        report = self.archive_crash(name)
        if self.stopping():  # stopping anyway: the learner needs no more data
            self.retired.add(name)
            logger.event(step, f"{fault}; not restarted, the run is ending")
            return
        if broken_env:  # fastrl's own env check failed: every incarnation would fail alike
            self.give_up(name, f"{fault}: not restarted, the env itself is at fault\n{report}",
                         logger, step, f"{fault}; the env breaks its contract: stopping the run")
            return
        now = time.monotonic()
        self.restart_times.append(now)
        while now - self.restart_times[0] > infra.restart_window_s:
            self.restart_times.popleft()
        if len(self.restart_times) > infra.max_restarts:
            self.give_up(name, (
                f"{len(self.restart_times)} worker failures within {infra.restart_window_s:g} "
                f"s (infra.max_restarts={infra.max_restarts}); the last: {fault}"
                + (f"\n{report.rstrip()}" if report else "")),
                logger, step, f"{fault}; giving up: too many restarts, stopping the run")
            return
        ring.set(INCARNATION, ring.get(INCARNATION) + 1)
        ring.set(HEARTBEAT_NS, 0)  # the new worker gets the start-up allowance
        ring.set(TERMINATE, 0)
        start_worker(i)
        self.restarts += 1
        last_line = report.strip().splitlines()[-1] if report else ""
        logger.event(step, f"restart {self.restarts}: {fault}" +
                     (f" [{last_line}]" if last_line and last_line not in fault else "") +
                     f"; started {name} again (pid {self.children[name].pid}, incarnation "
                     f"{ring.get(INCARNATION)})", detail=report)

    def give_up(self, name: str, failure: str, logger: MetricsLogger, step: int,
                event: str) -> None:
        """Retire worker ``name`` and stop the run; ``failure`` becomes the run's error."""
        self.retired.add(name)
        self.failure = failure
        logger.event(step, event)
        self.memory.control.request_stop()

    def end_worker(self, i: int) -> None:
        """SIGTERM (which a worker obeys only when its ring's TERMINATE word is set), then
        SIGKILL after TERM_GRACE_S; returns once the process is gone."""
        proc = self.children[f"worker {i}"]
        if proc.exitcode is None:
            self.memory.rings[i].set(TERMINATE, 1)
            proc.terminate()
            proc.join(TERM_GRACE_S)
            if proc.exitcode is None:
                proc.kill()
                proc.join(KILL_WAIT_S)
        if proc.exitcode is None:
            raise ChildFailed(f"worker {i} (pid {proc.pid}) survived SIGKILL for "
                              f"{KILL_WAIT_S:g} s; its ring cannot be reused")

    def archive_crash(self, name: str) -> str | None:
        """Move a replaced worker's crash report aside (``worker-1.failure-3.txt``: the run's
        third worker failure), so the next failure writes its own; returns the report."""
        self.failures += 1
        report = read_crash(self.run_dir, name)
        if report is not None:
            path = crash_report_path(self.run_dir, name)
            path.rename(path.with_suffix(f".failure-{self.failures}.txt"))
        return report

    # --- what the logs show ------------------------------------------------------------------
    def health(self, per_worker_timing: bool) -> dict[str, float]:
        """Supervisor scalars logged with every update; with ``per_worker_timing`` the
        workers' mean time per stage too (workers with clocks of their own)."""
        rings = self.memory.rings
        now = time.monotonic_ns()
        live = [r for i, r in enumerate(rings) if f"worker {i}" not in self.retired]
        ages = [(now - b) / 1e9 for b in (r.get(HEARTBEAT_NS) for r in live) if b]
        seen = [r.get(VERSION_SEEN) for r in live]
        health = {
            "supervisor/restarts": self.restarts,
            "supervisor/heartbeat_age_max_s": max(ages, default=0.0),
            "supervisor/worker_lag_max": self.memory.weights.version() - min(seen, default=0),
        }
        if per_worker_timing and rings:
            per_worker = [worker_timing(r) for r in rings]
            health.update(timing_metrics("workers", {
                stage: sum(t[stage] for t in per_worker) / len(per_worker)
                for stage in per_worker[0]}))
        return health
