"""The memory a run's processes share: one ring per worker and the weights, as
shared-memory segments (or, for the serial runtime, plain process memory: the same classes
work on any buffer), and putting a checkpoint's unread slots back into new rings."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from fastrl.checkpoint import Checkpoint, parked_path
from fastrl.learner.learner import ring_shape
from fastrl.memory.ring import INCARNATION, STEPS, Ring
from fastrl.memory.segments import SegmentOwner
from fastrl.memory.weights import SharedWeights
from fastrl.plan import RunPlan


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
        self.weights_name = ""

    def create(self) -> None:
        """Allocate the rings and the weights."""
        plan, n = self.plan, self.plan.cfg.infra.num_workers
        if self.shared:
            segments = [self.owner.create(f"ring{i}", plan.ring_bytes) for i in range(n)]
            self.ring_names = [s.name for s in segments]
            rings = [s.buf for s in segments]
            weights_shm = self.owner.create("weights", plan.weights_bytes)
            self.weights_name, weights = weights_shm.name, weights_shm.buf
        else:
            rings = [memoryview(bytearray(plan.ring_bytes)) for _ in range(n)]
            weights = memoryview(bytearray(plan.weights_bytes))
        self.rings = [Ring(buf, plan.layout, plan.cfg.infra.ring_slots) for buf in rings]
        self.weights = SharedWeights(weights, plan.num_params)

    def restore(self, resume: Checkpoint, run_dir: Path) -> dict[int, str]:
        """Put the checkpoint's unread slots back into the new rings and set each ring's
        incarnation; returns the parked worker states to continue from, by worker.

        Slots and worker states are used only when the ring shape and env arguments are
        those of the checkpoint; otherwise every worker starts fresh episodes with new seeds.
        """
        manifest, plan = resume.manifest, self.plan
        incarnations = manifest["worker_incarnations"]
        same = manifest["rings"] == ring_shape(plan.cfg, plan.layout.nbytes)
        states = {}
        with np.load(resume.file("rings.npz"), allow_pickle=False) as saved:
            for i, ring in enumerate(self.rings):
                # Each worker's step count goes on from the run's (DQN's epsilon follows it).
                ring.set(STEPS, resume.global_step // len(self.rings))
                if same:
                    read_seq, write_seq = saved[f"seqs{i}"].tolist()
                    ring.restore(read_seq, write_seq, saved[f"slots{i}"])
                    state = resume.file(f"worker-{i}.pkl")
                    if state is not None:
                        # A private copy: checkpoint retention may delete the folder before
                        # the worker has read it.
                        states[i] = str(parked_path(run_dir, i, -1))
                        Path(states[i]).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(state, states[i])
                    ring.set(INCARNATION, incarnations[i] + (state is None))
                else:
                    version = manifest["updates"]
                    ring.restore(version, version, np.empty((0, plan.layout.nbytes), np.uint8))
                    ring.set(INCARNATION, max(incarnations, default=0) + 1)
        return states

    def release(self) -> None:
        """Drop the views and unlink every segment."""
        self.rings = []
        self.weights = None
        self.owner.unlink_all()
