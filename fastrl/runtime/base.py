"""The interface of a runtime: where the learner and the workers of a run live
(``infra.runtime``), behind one :class:`Runtime` that the supervisor drives.

- ``local`` (:mod:`fastrl.runtime.local`): a learner process and one process per worker,
  over shared-memory rings;
- ``serial`` (:mod:`fastrl.runtime.serial`): all of it in the calling process;
- ``ray`` (:mod:`fastrl.runtime.ray_workers`): the learner as ``local``, the workers as Ray
  actors whose slots a relay thread puts into the rings.

The supervisor (:mod:`fastrl.runtime.supervisor`) owns the rest of the lifecycle: the memory,
the logs, stop requests, fault handling and the cleanup on every exit path.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from fastrl.plan import RunPlan
from fastrl.runtime.checkpoint_evals import CheckpointEvals
from fastrl.runtime.children import Children
from fastrl.runtime.faults import Watchdog, worker_timing
from fastrl.runtime.memory import RunMemory
from fastrl.runtime.periodic_evals import PeriodicEvals
from fastrl.runtime.signals import StopRequests
from fastrl.telemetry.events import RunEvents
from fastrl.telemetry.metrics import MetricsLogger


@dataclass
class RunState:
    """One run as a runtime sees it: its plan, memory, logs, stop flags, children,
    checkpoint evaluations, periodic evaluations (process runtimes) and watchdog;
    ``worker_states`` are parked worker states to continue from (by worker) and ``resume``
    the checkpoint folder the learner continues from."""

    plan: RunPlan
    run_dir: Path
    memory: RunMemory
    events: RunEvents
    stop: StopRequests
    children: Children
    evals: CheckpointEvals
    periodic: PeriodicEvals
    watchdog: Watchdog
    worker_states: dict[int, str]
    resume: str | None


class Runtime(ABC):
    """Runs the learner and the workers of one run (see the module documentation)."""

    #: learner and workers run in the calling process, on process memory and one clock
    in_process = False

    @abstractmethod
    def execute(self, run: RunState) -> None:
        """Run the learner and the workers until the learner has reported its result;
        raise :class:`~fastrl.runtime.faults.ChildFailed` when the run cannot go on."""

    def close(self, logger: MetricsLogger, step: int) -> None:
        """Release what the runtime holds once its children are gone, before the shared
        memory is unlinked. Never raises (nothing may keep the memory from being
        released); may be called without :meth:`execute` having run. Nothing to release
        by default."""
        return

    def relay_counters(self) -> dict[str, int]:
        """Slots relayed and the ns spent relaying them (the Ray runtime; else empty)."""
        return {}

    def timing(self, run: RunState) -> dict[str, dict[str, float]]:
        """Seconds per stage of every process (fastrl.core.timing): the learner's from its
        last message, each worker's from its ring's counters (one table for ``serial``)."""
        final = run.events.final or {}
        if self.in_process:
            table = {"serial": final.get("timing", {})}
        else:
            table = {"learner": final.get("timing", {})}
            for i, ring in enumerate(run.memory.rings):
                table[f"worker {i}"] = worker_timing(ring)
        return table if table.get("serial", table.get("learner")) else {}

