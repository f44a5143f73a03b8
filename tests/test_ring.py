"""SPSC ring: a producer process and this consumer, every slot checksummed."""

from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np
import pytest

from fastrl.memory.layout import Field, SlotLayout
from fastrl.memory.ring import CONTROL_BYTES, READ_SEQ, WRITE_SEQ, Ring
from fastrl.memory.segments import SegmentOwner, attach
from fastrl.memory.wait import Stopped, wait_until

LAYOUT = SlotLayout([
    Field("seq", (1,), np.dtype(np.int64)),
    Field("payload", (61,), np.dtype(np.float64)),
    Field("checksum", (1,), np.dtype(np.float64)),
])


def payload_for(seq: int) -> np.ndarray:
    return np.sin(np.arange(61) * 0.37 + seq)


def produce(name: str, slots: int, count: int) -> None:
    shm = attach(name)
    ring = Ring(shm.buf, LAYOUT, slots)
    for seq in range(count):
        wait_until(ring.has_free_slot, lambda: False, timeout_s=60)
        slot = ring.write_slot()
        slot["seq"][0] = seq
        p = payload_for(seq)
        slot["payload"][:] = p
        slot["checksum"][0] = p.sum()
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
            assert slot["checksum"][0] == slot["payload"].sum(), f"torn slot {seq}"
            assert np.array_equal(slot["payload"], payload_for(seq)), f"wrong data in {seq}"
            ring.release()
        producer.join(30)
        assert producer.exitcode == 0
        assert not ring.has_ready_slot()
        assert seen_full > 0, "the producer never met backpressure"
    finally:
        owner.unlink_all()


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
