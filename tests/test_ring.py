"""SPSC ring: a producer process and this consumer, every slot checksummed."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import numpy as np
import pytest

from fastrl.memory.layout import Field, SlotLayout
from fastrl.memory.ring import CONTROL_BYTES, READ_SEQ, WRITE_SEQ, Ring, TornSlot
from fastrl.memory.segments import SegmentOwner, attach
from fastrl.memory.wait import Stopped, wait_until

LAYOUT = SlotLayout([
    Field("seq", (1,), np.dtype(np.int64)),
    Field("payload", (61,), np.dtype(np.float64)),
    Field("checksum", (), np.dtype(np.uint32)),  # Ring.stamp / Ring.verify: CRC32
])


def payload_for(seq: int) -> np.ndarray:
    return np.sin(np.arange(61) * 0.37 + seq)


def produce(name: str, slots: int, count: int) -> None:
    """Publish slots ``write_seq .. count-1``: a restarted producer continues the ring."""
    shm = attach(name)
    ring = Ring(shm.buf, LAYOUT, slots)
    for seq in range(ring.write_seq, count):
        wait_until(ring.has_free_slot, lambda: False, timeout_s=60)
        slot = ring.write_slot()
        slot["seq"][0] = seq
        p = payload_for(seq)
        for half in (slice(0, 30), slice(30, 61)):  # two writes: a kill can fall between
            slot["payload"][half] = p[half]
        ring.stamp()
        ring.publish()


def test_ring_segment_has_counters_on_their_own_cache_lines():
    assert WRITE_SEQ * 8 // 64 != READ_SEQ * 8 // 64
    assert CONTROL_BYTES % 64 == 0


@pytest.mark.timeout(240)
def test_stress_100k_slots_none_lost_duplicated_or_torn(no_shm_residue):
    count, slots = 100_000, 8
    owner = SegmentOwner()
    try:
        shm = owner.create("stress", Ring.nbytes(LAYOUT, slots))
        producer = mp.get_context("spawn").Process(target=produce, args=(shm.name, slots, count))
        producer.start()
        ring = Ring(shm.buf, LAYOUT, slots)
        seen_full = 0
        t_end = time.monotonic() + 200
        for expected in range(count):
            wait_until(ring.has_ready_slot, lambda: not producer.is_alive()
                       and not ring.has_ready_slot(), timeout_s=max(1, t_end - time.monotonic()))
            seen_full += ring.occupancy() == slots
            slot = ring.read_slot()
            seq = int(slot["seq"][0])
            assert seq == expected, "slot lost, duplicated or reordered"
            ring.verify()  # raises TornSlot
            assert np.array_equal(slot["payload"], payload_for(seq)), f"wrong data in {seq}"
            ring.release()
        producer.join(30)
        assert producer.exitcode == 0
        assert not ring.has_ready_slot()
        assert seen_full > 0, "the producer never met backpressure"
    finally:
        owner.unlink_all()


@pytest.mark.timeout(240)
def test_producer_killed_mid_slot_and_restarted_never_hands_over_a_torn_slot(no_shm_residue):
    # What the supervisor does to a hung or crashed worker: SIGKILL, then a new producer on
    # the same ring. The consumer must see every seq once, in order, each slot intact.
    count, slots, kills = 60_000, 4, 5
    owner = SegmentOwner()
    ctx = mp.get_context("spawn")
    producer = None
    try:
        shm = owner.create("restart", Ring.nbytes(LAYOUT, slots))
        ring = Ring(shm.buf, LAYOUT, slots)
        kill_at = set(range(count // (kills + 1), count, count // (kills + 1)))
        expected = 0
        while expected < count:
            producer = ctx.Process(target=produce, args=(shm.name, slots, count))
            producer.start()
            t_end = time.monotonic() + 120
            while expected < count:
                wait_until(ring.has_ready_slot, lambda: False,
                           timeout_s=max(1, t_end - time.monotonic()))
                ring.verify()
                assert int(ring.read_slot()["seq"][0]) == expected
                assert np.array_equal(ring.read_slot()["payload"], payload_for(expected))
                ring.release()
                expected += 1
                if expected in kill_at:  # the producer is busy refilling the freed slot
                    os.kill(producer.pid, signal.SIGKILL)
                    producer.join(30)
                    break
        producer.join(30)
        assert producer.exitcode == 0
    finally:
        if producer is not None and producer.is_alive():
            producer.kill()
            producer.join(30)
        owner.unlink_all()


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
