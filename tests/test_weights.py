"""Seqlock weights: a reader never keeps a copy that overlapped a write."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

import numpy as np
import pytest

from fastrl.memory.segments import SegmentOwner, attach
from fastrl.memory.weights import SharedWeights

N = 200_000  # large enough that a copy takes long and overlaps writes


def write_versions(name: str, versions: int) -> None:
    shm = attach(name)
    w = SharedWeights(shm.buf, N)
    for v in range(1, versions + 1):
        w.write(np.full(N, v, np.float32), v)
        time.sleep(50e-6)  # let the reader in between writes too, not only during them
    w.request_stop()


@pytest.mark.timeout(120)
def test_reader_copies_are_never_torn_under_concurrent_writes(no_shm_residue):
    owner = SegmentOwner()
    try:
        shm = owner.create("seqlock", SharedWeights.nbytes(N))
        w = SharedWeights(shm.buf, N)
        w.write(np.zeros(N, np.float32), 0)
        writer = mp.get_context("spawn").Process(target=write_versions, args=(shm.name, 3000))
        writer.start()
        out = np.empty(N, np.float32)
        reads, last, distinct = 0, -1, set()
        while not w.stop_requested() or reads == 0:
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


def test_reader_waits_out_a_write_in_progress():
    w = SharedWeights(memoryview(bytearray(SharedWeights.nbytes(4))), 4)
    w.write(np.ones(4, np.float32), 1)
    w.hdr[0] += 1  # SEQ odd: as if the writer were mid-copy
    w.params[:2] = 2  # half-written data
    got = []
    reader = threading.Thread(target=lambda: got.append(w.read_into(np.empty(4, np.float32))))
    reader.start()
    reader.join(0.2)
    assert reader.is_alive() and not got, "read a vector while SEQ was odd"
    w.params[:] = 2
    w.hdr[8] = 2
    w.hdr[0] += 1  # write complete
    reader.join(5)
    assert got == [2]


def test_version_before_first_write_and_read_guard():
    w = SharedWeights(memoryview(bytearray(SharedWeights.nbytes(4))), 4)
    assert w.version() == -1
    with pytest.raises(RuntimeError, match="no weights"):
        w.read_into(np.empty(4, np.float32))
    w.write(np.arange(4, dtype=np.float32), 7)
    out = np.empty(4, np.float32)
    assert w.read_into(out) == 7 and w.version() == 7
    assert np.array_equal(out, np.arange(4))
