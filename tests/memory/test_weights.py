"""Seqlock weights in one process: a reader waits out a write in progress; versions and the
read guard. (A writer process against this reader: tests/runtime/test_shared_memory.py.)"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from fastrl.memory.weights import SharedWeights


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
