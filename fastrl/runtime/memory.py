"""The memory a run's processes share: one ring per worker, the weights and the run's
control flags, as
shared-memory segments (or, for the serial runtime, plain process memory: the same classes
work on any buffer), and putting a checkpoint's unread slots back into new rings."""

from __future__ import annotations

from pathlib import Path

from fastrl.checkpoint import Checkpoint
from fastrl.memory.control import RunControl
from fastrl.memory.ring import Ring
from fastrl.memory.segments import SegmentOwner
from fastrl.memory.weights import SharedWeights
from fastrl.plan import RunPlan
from fastrl.resume import restore_rings


class RunMemory:
    """The rings and the weights of one run; :meth:`release` unlinks every segment."""

    def __init__(self, plan: RunPlan, shared: bool) -> None:
        self.plan, self.shared = plan, shared
        if shared:
            plan.check_shared_memory()
        self.owner = SegmentOwner()
        self.rings: list[Ring] = []
        self.ring_names: list[str] = []
        self.weights: SharedWeights | None = None
        self.pool: SharedWeights | None = None  # self-play's (fastrl.selfplay)
        self.weights_name = ""
        self.control: RunControl | None = None
        self.control_name = ""

    def create(self) -> None:
        """Allocate the rings and the weights."""
        plan, n = self.plan, self.plan.cfg.infra.num_workers
        if self.shared:
            segments = [self.owner.create(f"ring{i}", plan.ring_bytes) for i in range(n)]
            self.ring_names = [s.name for s in segments]
            rings = [s.buf for s in segments]
            weights_shm = self.owner.create("weights", plan.weights_bytes)
            self.weights_name, weights = weights_shm.name, weights_shm.buf
            control_shm = self.owner.create("control", plan.control_bytes)
            self.control_name, control = control_shm.name, control_shm.buf
        else:
            rings = [memoryview(bytearray(plan.ring_bytes)) for _ in range(n)]
            weights = memoryview(bytearray(plan.weights_bytes))
            control = memoryview(bytearray(plan.control_bytes))
        self.rings = [Ring(buf, plan.layout, plan.cfg.infra.ring_slots) for buf in rings]
        self.weights, self.pool = plan.weights_of(weights)
        self.control = RunControl(control)

    def restore(self, resume: Checkpoint, run_dir: Path) -> dict[int, str]:
        """Put the checkpoint's unread slots back into the new rings
        (:func:`fastrl.resume.restore_rings`); returns the parked worker states to continue
        from, by worker."""
        return restore_rings(resume, self.rings, self.plan, run_dir)

    def release(self) -> None:
        """Drop the views and unlink every segment."""
        self.rings = []
        self.weights = self.pool = self.control = None
        self.owner.unlink_all()
