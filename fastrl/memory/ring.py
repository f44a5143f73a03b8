"""Single-producer single-consumer ring of trajectory slots in one shared segment.

Segment = control block (one int64 counter per 64-byte cache line) + ``slots`` slots.

Protocol (DESIGN.md "The ring protocol"):

- the worker (only writer of ``WRITE_SEQ``) fills slot ``write_seq % slots`` while
  ``write_seq - read_seq < slots``, then ``store_release(WRITE_SEQ, write_seq + 1)``;
- the learner (only writer of ``READ_SEQ``) reads slot ``read_seq % slots`` while
  ``read_seq < load_acquire(WRITE_SEQ)``, then ``store_release(READ_SEQ, read_seq + 1)``
  once it no longer needs the memory.

Why this is safe without locks: each counter has one writer, so no read-modify-write
races exist; the release fence orders the slot's bytes before the counter that publishes
them, the acquire fence orders the counter before the reads that use it (see atomics.py for
x86-64 vs aarch64), and the counters are 8-byte aligned so they are never torn. A worker
that dies mid-slot never stored the new ``WRITE_SEQ``, so the learner never sees that slot.
The same argument in reverse makes ``READ_SEQ`` safe: the worker reuses a slot only after
the learner's release of it is visible.
"""

from __future__ import annotations

import numpy as np

from fastrl.memory.atomics import load_acquire, store_release
from fastrl.memory.layout import SlotLayout

LINE = 8  # int64 counters per cache line
# Worker-owned status after WRITE_SEQ / READ_SEQ: heartbeat, and the nanoseconds its slots
# spent choosing actions, stepping envs, and in all (the per-stage profile of the bench).
WRITE_SEQ, READ_SEQ, HEARTBEAT_NS, ACT_NS, ENV_NS, FILL_NS = (k * LINE for k in range(6))
CONTROL_BYTES = 8 * 64  # eight 64-byte lines, one per counter


class Ring:
    """A view of one ring; the producer and the consumer each construct their own."""

    def __init__(self, buf: memoryview, layout: SlotLayout, slots: int) -> None:
        if len(buf) < self.nbytes(layout, slots):
            raise ValueError(f"buffer of {len(buf)} bytes is too small for this ring")
        self.layout = layout
        self.slots = slots
        self.ctrl = np.ndarray((CONTROL_BYTES // 8,), np.int64, buffer=buf)
        self._slot_views = [
            layout.views(buf, CONTROL_BYTES + i * layout.nbytes) for i in range(slots)
        ]
        # Each side caches the counter it owns: nobody else writes it.
        self._write_seq = int(self.ctrl[WRITE_SEQ])
        self._read_seq = int(self.ctrl[READ_SEQ])

    @staticmethod
    def nbytes(layout: SlotLayout, slots: int) -> int:
        """Bytes of the segment that holds such a ring."""
        return CONTROL_BYTES + slots * layout.nbytes

    # --- producer side -------------------------------------------------------------------
    @property
    def write_seq(self) -> int:
        """Slots published so far (producer's view)."""
        return self._write_seq

    def has_free_slot(self) -> bool:
        """True when the slot at ``write_seq`` is no longer held by the consumer."""
        return self._write_seq - load_acquire(self.ctrl, READ_SEQ) < self.slots

    def write_slot(self) -> dict[str, np.ndarray]:
        """Arrays of the slot to fill next; call only when :meth:`has_free_slot`."""
        return self._slot_views[self._write_seq % self.slots]

    def publish(self) -> None:
        """Make the filled slot visible to the consumer."""
        self._write_seq += 1
        store_release(self.ctrl, WRITE_SEQ, self._write_seq)

    # --- consumer side -------------------------------------------------------------------
    @property
    def read_seq(self) -> int:
        """Slots released so far (consumer's view)."""
        return self._read_seq

    def has_ready_slot(self) -> bool:
        """True when a published slot waits at ``read_seq``."""
        return self._read_seq < load_acquire(self.ctrl, WRITE_SEQ)

    def read_slot(self) -> dict[str, np.ndarray]:
        """Arrays of the oldest published slot; call only when :meth:`has_ready_slot`."""
        return self._slot_views[self._read_seq % self.slots]

    def release(self) -> None:
        """Hand the slot returned by :meth:`read_slot` back to the producer."""
        self._read_seq += 1
        store_release(self.ctrl, READ_SEQ, self._read_seq)

    def occupancy(self) -> int:
        """Published slots not yet released."""
        return int(load_acquire(self.ctrl, WRITE_SEQ)) - self._read_seq

    # --- status counters (any process may read; one process writes each) -----------------
    def set(self, counter: int, value: int) -> None:
        """Store a status counter (heartbeat, steps, ...) written only by its owner."""
        store_release(self.ctrl, counter, value)

    def get(self, counter: int) -> int:
        """Read a control-block counter."""
        return int(load_acquire(self.ctrl, counter))
