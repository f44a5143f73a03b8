"""The child processes of a run (learner, workers, checkpoint evaluations) and the Ray
worker actors, which present the same process interface: starting, naming, ending."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastrl.core.files import DiskFull, free_bytes
from fastrl.core.forkserver import child_context, start_fork_server
from fastrl.core.process import EXIT_DISK_FULL, read_crash
from fastrl.memory.segments import SHM_DIR, free_shm_bytes

POLL_S = 0.05
# The learner may be evaluating, waiting up to PARK_WAIT_S (20 s) for the workers to park,
# and checkpointing when asked to stop.
GRACEFUL_EXIT_S = 60.0
KILL_WAIT_S = 5.0  # also the grace after a failure: a crashed run need not wait long
# The children that evaluate (checkpoints, the learner's weights): they ignore the stop flag.
CHECKPOINT_EVAL, PERIODIC_EVAL = "eval", "periodic eval"
EVALUATIONS = (CHECKPOINT_EVAL, PERIODIC_EVAL)


class Children:
    """Every child of the run by name ('learner', 'worker 0', 'eval'), and when each was
    started (the start-up allowance of its heartbeat)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.ctx = child_context()  # (fastrl.core.forkserver: not a fork of this process)
        self.procs: dict[str, Any] = {}
        self.started_ns: dict[str, int] = {}

    @staticmethod
    def parent_pid() -> int:
        """The pid of the process that forks every child (the fork server, started now if it
        is not running): what a child's ``become_child`` checks its parent against."""
        return start_fork_server()

    def spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        """Start ``target(*args)`` in a new process, child ``name``."""
        # (It is forked by the fork server, which ignores SIGINT and SIGTERM: so does the
        # child until become_child, and a Ctrl-C to the process group cannot kill it early.)
        proc = self.ctx.Process(target=target, args=args, name=f"fastrl {name}", daemon=True)
        proc.start()
        self.track(name, proc)

    def track(self, name: str, proc: Any) -> None:
        """Watch ``proc`` (a process, or a worker actor's handle) as child ``name``."""
        self.procs[name] = proc
        self.started_ns[name] = time.monotonic_ns()

    def __getitem__(self, name: str) -> Any:
        return self.procs[name]

    def get(self, name: str) -> Any:
        """Child ``name``, or None before it was started."""
        return self.procs.get(name)

    def pids(self) -> dict[str, int | str]:
        """The pid of every child by name ('?' for an actor that has not started yet)."""
        return {name: proc.pid for name, proc in self.procs.items()}

    def describe_exit(self, name: str) -> str:
        """How child ``name`` ended, with the learner's crash report."""
        proc = self.procs[name]
        code = proc.exitcode
        if code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
            if -code == signal.SIGBUS:  # a page of a segment that tmpfs could not back
                how += (f" (a full {SHM_DIR} does this to a process writing shared memory: "
                        f"{free_shm_bytes():,} bytes free now)")
        elif code == 0:
            how = "exited before the run was stopped"
        elif code == EXIT_DISK_FULL:
            return f"{name} (pid {proc.pid}) stopped: {self.disk_full(name)}"
        else:
            how = f"exited with code {code}"
        report = read_crash(self.run_dir, name)
        msg = f"{name} (pid {proc.pid}) {how}"
        return f"{msg}:\n{report.rstrip()}" if report and name == "learner" else msg

    def disk_full(self, name: str) -> str:
        """What child ``name``, ended by a full disk (EXIT_DISK_FULL), failed to write: its
        crash report's one line, or as much as is known when the disk had no room for it."""
        report = (read_crash(self.run_dir, name) or "").strip()
        if report:
            return report.splitlines()[-1].removeprefix(f"{DiskFull.__name__}: ")
        return (f"no space left on device (its crash report could not be written either); "
                f"{free_bytes(self.run_dir):,} bytes free")

    def stop_all(self, grace_s: float, forced: Callable[[], bool]) -> None:
        """Let every child exit on the stop flag within ``grace_s`` (unless ``forced()``),
        then kill what is left. An evaluation still running (of a checkpoint, or periodic)
        is killed at once: it does not look at the stop flag, and its result is no longer
        wanted."""
        for name in EVALUATIONS:
            evaluating = self.procs.get(name)
            if evaluating is not None and evaluating.is_alive():
                evaluating.kill()
        deadline = time.monotonic() + grace_s
        procs = list(self.procs.values())
        while any(p.is_alive() for p in procs) and not forced() and \
                time.monotonic() < deadline:
            time.sleep(POLL_S)
        for p in procs:
            if p.is_alive():
                p.kill()  # children ignore SIGTERM (see fastrl.core.process.become_child)
        for p in procs:
            p.join(KILL_WAIT_S)

    def clear(self) -> None:
        """Forget every child: an exception's traceback keeps the supervisor's frames alive,
        and the processes' arguments hold the metrics queue, whose semaphores must leave
        /dev/shm now rather than whenever the traceback is collected."""
        self.procs.clear()
