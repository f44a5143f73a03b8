"""Single-producer single-consumer ring of trajectory slots in one shared segment.

Segment = control block (one int64 counter per 64-byte cache line) + ``slots`` slots.

Protocol (docs/architecture.md, "The ring protocol"):

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

import zlib

import numpy as np

from fastrl.memory.atomics import load_acquire, store_release
from fastrl.memory.layout import SlotLayout

LINE = 8  # int64 counters per cache line
# After WRITE_SEQ / READ_SEQ, worker-owned status: heartbeat (monotonic ns), env steps taken,
# the newest weights version it acts with, and the nanoseconds its slots spent choosing
# actions, stepping envs, and in all (the per-stage profile of the bench; FILL_NS is the
# worker's rollout stage), reading weights and waiting, and compiling numba kernels
# (fastrl.core.timing). The supervisor's:
# INCARNATION (restarts of this ring's worker so far) and TERMINATE (set before it sends the
# worker SIGTERM, see fastrl.rollout.worker); it writes them only while no worker runs.
(WRITE_SEQ, READ_SEQ, HEARTBEAT_NS, STEPS, VERSION_SEEN, ACT_NS, ENV_NS, FILL_NS,
 INCARNATION, TERMINATE, SYNC_NS, WAIT_NS, JIT_NS) = (k * LINE for k in range(13))
CONTROL_BYTES = 16 * 64  # one 64-byte line per counter, room for more


class TornSlot(RuntimeError):
    """A published slot whose bytes do not match the checksum its producer stamped."""


class Ring:
    """A view of one ring; the producer and the consumer each construct their own."""

    def __init__(self, buf: memoryview, layout: SlotLayout, slots: int) -> None:
        if len(buf) < self.nbytes(layout, slots):
            raise ValueError(f"buffer of {len(buf)} bytes is too small for this ring")
        self.layout = layout
        self.slots = slots
        self._buf = buf
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

    def write_bytes(self) -> np.ndarray:
        """The raw bytes of the slot :meth:`write_slot` returns, as one uint8 view (a slot
        that arrives whole from elsewhere is put in with one memcpy)."""
        return self._raw(self._write_seq)

    def stamp(self) -> None:
        """Store the CRC32 of the slot to publish next in its ``checksum`` field."""
        self.write_slot()["checksum"][...] = self._crc(self._write_seq)

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

    def read_slot(self, ahead: int = 0) -> dict[str, np.ndarray]:
        """Arrays of the oldest published slot (``ahead``: of the one that many places
        after it); call only when :meth:`occupancy` exceeds ``ahead``."""
        return self._slot_views[(self._read_seq + ahead) % self.slots]

    def read_bytes(self) -> np.ndarray:
        """The raw bytes of the slot :meth:`read_slot` returns, as one uint8 view (a whole
        slot moves in one memcpy)."""
        return self._raw(self._read_seq)

    def _raw(self, seq: int) -> np.ndarray:
        base = CONTROL_BYTES + (seq % self.slots) * self.layout.nbytes
        return np.frombuffer(self._buf, np.uint8, self.layout.nbytes, base)

    def verify(self, ahead: int = 0) -> None:
        """Raise :class:`TornSlot` unless the slot :meth:`read_slot` returns for ``ahead``
        matches its stamp."""
        seq = self._read_seq + ahead
        stored = int(self.read_slot(ahead)["checksum"])
        actual = self._crc(seq)
        if stored != actual:
            raise TornSlot(f"slot {seq} has CRC32 {actual:#010x}, its producer "
                           f"stamped {stored:#010x}: the ring delivered torn or corrupted data")

    def release(self) -> None:
        """Hand the slot returned by :meth:`read_slot` back to the producer."""
        self._read_seq += 1
        store_release(self.ctrl, READ_SEQ, self._read_seq)

    def occupancy(self) -> int:
        """Published slots not yet released."""
        return int(load_acquire(self.ctrl, WRITE_SEQ)) - self._read_seq

    def _crc(self, seq: int) -> int:
        # Every byte of the slot before the checksum field, padding (always zero) included.
        base = CONTROL_BYTES + (seq % self.slots) * self.layout.nbytes
        return zlib.crc32(self._buf[base: base + self.layout.offsets["checksum"]])

    # --- checkpointing (no process may be using the ring) ---------------------------------
    def _rows(self) -> np.ndarray:
        """Every slot's raw bytes, ``[slots, slot bytes]`` uint8 (a view)."""
        raw = np.frombuffer(self._buf, np.uint8, self.slots * self.layout.nbytes, CONTROL_BYTES)
        return raw.reshape(self.slots, self.layout.nbytes)

    def pending(self) -> tuple[int, int, np.ndarray]:
        """``(read_seq, write_seq, bytes)``: the published, unreleased slots as a
        ``[write_seq - read_seq, slot bytes]`` uint8 array."""
        write_seq = self.get(WRITE_SEQ)
        return self._read_seq, write_seq, self._rows()[[s % self.slots for s in
                                                        range(self._read_seq, write_seq)]]

    def restore(self, read_seq: int, write_seq: int, data: np.ndarray) -> None:
        """Put back what :meth:`pending` returned, before any producer or consumer starts."""
        if data.shape != (write_seq - read_seq, self.layout.nbytes) or \
                not 0 <= write_seq - read_seq <= self.slots:
            raise ValueError(f"{data.shape} bytes for slots {read_seq}..{write_seq} do not fit "
                             f"a ring of {self.slots} slots of {self.layout.nbytes} bytes")
        rows = self._rows()
        for k, seq in enumerate(range(read_seq, write_seq)):
            rows[seq % self.slots] = data[k]
        self.ctrl[READ_SEQ], self.ctrl[WRITE_SEQ] = read_seq, write_seq
        self._read_seq, self._write_seq = read_seq, write_seq

    # --- status counters (any process may read; one process writes each) -----------------
    def set(self, counter: int, value: int) -> None:
        """Store a status counter (heartbeat, steps, ...) written only by its owner."""
        store_release(self.ctrl, counter, value)

    def get(self, counter: int) -> int:
        """Read a control-block counter."""
        return int(load_acquire(self.ctrl, counter))

    def get_own(self, counter: int) -> int:
        """Read a counter that only this process writes (the supervisor's INCARNATION):
        its own stores need no ordered load. A process's first ordered load costs ~0.3 s
        of numba start-up (fastrl.memory.atomics.warm_up), which the supervisor must not
        pay between starting the learner and the workers."""
        return int(self.ctrl[counter])
