"""Shared memory between real processes: an SPSC ring fed by a spawned producer (100k slots,
none lost, duplicated or torn; a producer SIGKILLed mid-slot and restarted), and seqlock
weights read while a spawned writer writes. Every wait is bounded; /dev/shm is checked."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import numpy as np
import pytest
from helpers import payload_for, produce, ring_layout, write_versions

from fastrl.memory.ring import Ring
from fastrl.memory.segments import SegmentOwner
from fastrl.memory.wait import wait_until
from fastrl.memory.weights import SharedWeights

LAYOUT = ring_layout()
N = 200_000  # weights: large enough that a copy takes long and overlaps writes


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



@pytest.mark.timeout(120)
def test_reader_copies_are_never_torn_under_concurrent_writes(no_shm_residue):
    owner = SegmentOwner()
    try:
        shm = owner.create("seqlock", SharedWeights.nbytes(N))
        w = SharedWeights(shm.buf, N)
        w.write(np.zeros(N, np.float32), 0)
        writer = mp.get_context("spawn").Process(target=write_versions, args=(shm.name, N, 3000))
        writer.start()
        out = np.empty(N, np.float32)
        reads, last, distinct = 0, -1, set()
        while (w.version() < 3000 and writer.is_alive()) or reads == 0:
            v = w.read_into(out)
            assert out.min() == out.max() == v, f"torn copy: version {v}, data {out.min()}.." \
                                                 f"{out.max()}"
            assert v >= last, "versions went backwards"
            last = v
            distinct.add(v)
            reads += 1
        writer.join(30)
        assert writer.exitcode == 0
        assert w.version() == 3000 and w.read_into(out) == 3000 and out[0] == 3000
        assert len(distinct) > 10, "the reader never overlapped the writer"
    finally:
        owner.unlink_all()

