"""Seqlock weights in one process: a reader waits out a write in progress; versions and the
read guard; banks that keep each key until it is read, and say so when one was replaced.
(A writer process against this reader: tests/runtime/test_shared_memory.py.)"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from fastrl.memory.weights import SEQ, KeyOverwritten, SharedWeights


def weights(n: int = 4, banks: int = 1) -> SharedWeights:
    return SharedWeights(memoryview(bytearray(SharedWeights.nbytes(n, banks))), n, banks)


def test_reader_waits_out_a_write_in_progress():
    w = weights()
    w.write(np.ones(4, np.float32), 1)
    hdr, vector = w.headers[0], w.vectors[0]
    hdr[SEQ] += 1  # odd: as if the writer were mid-copy
    vector[:2] = 2  # half-written data
    got = []
    reader = threading.Thread(target=lambda: got.append(w.read_into(np.empty(4, np.float32))))
    reader.start()
    reader.join(0.2)
    assert reader.is_alive() and not got, "read a vector while SEQ was odd"
    vector[:] = 2
    hdr[1:3] = 2 + 1, 2  # KEY + 1, VERSION
    w.latest[0] = 2 + 1
    hdr[SEQ] += 1  # write complete
    reader.join(5)
    assert got == [2]


def test_version_before_first_write_and_read_guard():
    w = weights()
    assert w.version() == -1 and w.latest_key() == -1
    with pytest.raises(RuntimeError, match="no weights"):
        w.read_into(np.empty(4, np.float32))
    w.write(np.arange(4, dtype=np.float32), 7)
    out = np.empty(4, np.float32)
    assert w.read_into(out) == 7 and w.version() == 7
    assert np.array_equal(out, np.arange(4))


def test_each_key_stays_in_its_bank_until_a_later_one_replaces_it():
    w = weights(3, banks=3)
    for key in range(5):  # keys 2, 3, 4 are held now
        w.write(np.full(3, key, np.float32), version=10 * key, key=key)
    out = np.empty(3, np.float32)
    for key in (2, 3, 4):
        assert w.has(key) and w.read_key(key, out) == 10 * key and out[0] == key
    assert w.version() == 40 and w.latest_key() == 4 and not w.has(5)
    with pytest.raises(KeyOverwritten, match="key 1 were replaced by key 4"):
        w.read_key(1, out)


def test_a_reader_of_a_key_not_yet_written_waits_for_it():
    w = weights(2, banks=2)
    w.write(np.zeros(2, np.float32), 0)
    got = []
    reader = threading.Thread(target=lambda: got.append(w.read_key(1, np.empty(2, np.float32))))
    reader.start()
    reader.join(0.2)
    assert reader.is_alive() and not got
    w.write(np.ones(2, np.float32), version=5, key=1)
    reader.join(5)
    assert got == [5]
