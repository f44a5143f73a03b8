"""SPSC ring in one process: counters on their own cache lines, CRC verification, pending
slots through a checkpoint, backpressure, stopping a wait. (A producer process against this
consumer: tests/runtime/test_shared_memory.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import payload_for, ring_layout

from fastrl.memory.ring import CONTROL_BYTES, INCARNATION, READ_SEQ, WRITE_SEQ, Ring, TornSlot
from fastrl.memory.wait import Stopped, wait_until

LAYOUT = ring_layout()


def test_ring_segment_has_counters_on_their_own_cache_lines():
    assert WRITE_SEQ * 8 // 64 != READ_SEQ * 8 // 64
    assert CONTROL_BYTES % 64 == 0


def test_the_writer_reads_its_own_counter_plainly_as_others_read_it():
    buf = memoryview(bytearray(Ring.nbytes(LAYOUT, 2)))
    supervisor, other = Ring(buf, LAYOUT, 2), Ring(buf, LAYOUT, 2)
    supervisor.set(INCARNATION, 3)
    assert supervisor.get_own(INCARNATION) == other.get(INCARNATION) == 3
    assert supervisor.get_own(READ_SEQ) == 0


def test_a_corrupted_slot_fails_verification():
    buf = memoryview(bytearray(Ring.nbytes(LAYOUT, 2)))
    prod, cons = Ring(buf, LAYOUT, 2), Ring(buf, LAYOUT, 2)
    prod.write_slot()["payload"][:] = payload_for(3)
    prod.stamp()
    prod.publish()
    cons.verify()  # intact
    cons.read_slot()["payload"][7] += 1e-9  # one bit flipped after publication
    with pytest.raises(TornSlot, match="slot 0 has CRC32"):
        cons.verify()


def test_pending_slots_survive_a_checkpoint_round_trip():
    buf = memoryview(bytearray(Ring.nbytes(LAYOUT, 3)))
    prod, cons = Ring(buf, LAYOUT, 3), Ring(buf, LAYOUT, 3)
    for seq in range(5):  # slots 0..4 published; 0 and 1 consumed; 2..4 pending (wrapped)
        if seq >= 3:
            cons.release()
        prod.write_slot()["seq"][0] = seq
        prod.stamp()
        prod.publish()
    read_seq, write_seq, data = cons.pending()
    assert (read_seq, write_seq, data.shape) == (2, 5, (3, LAYOUT.nbytes))
    fresh = Ring(memoryview(bytearray(Ring.nbytes(LAYOUT, 3))), LAYOUT, 3)
    fresh.restore(read_seq, write_seq, data)
    consumer = Ring(fresh._buf, LAYOUT, 3)  # a process attaching after the restore
    for seq in range(2, 5):
        assert consumer.has_ready_slot() and int(consumer.read_slot()["seq"][0]) == seq
        consumer.verify()
        consumer.release()
    assert not consumer.has_ready_slot() and Ring(fresh._buf, LAYOUT, 3).write_seq == 5
    with pytest.raises(ValueError, match="do not fit"):
        fresh.restore(0, 4, np.zeros((4, LAYOUT.nbytes), np.uint8))


def test_producer_blocks_when_full_and_resumes_after_release():
    buf = memoryview(bytearray(Ring.nbytes(LAYOUT, 2)))
    prod, cons = Ring(buf, LAYOUT, 2), Ring(buf, LAYOUT, 2)
    for _ in range(2):
        assert prod.has_free_slot()
        prod.publish()
    assert not prod.has_free_slot()
    with pytest.raises(TimeoutError):
        wait_until(prod.has_free_slot, lambda: False, timeout_s=0.05)
    assert cons.has_ready_slot() and cons.occupancy() == 2
    cons.release()
    assert prod.has_free_slot()


def test_wait_is_abandoned_on_stop():
    with pytest.raises(Stopped):
        wait_until(lambda: False, lambda: True)
