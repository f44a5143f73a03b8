"""Policy weights in shared memory under a seqlock (the run's flags are
fastrl.memory.control's).

Header lines (one int64 per 64-byte line): ``SEQ`` (odd while the learner writes),
``VERSION`` (number of learner updates behind these weights). Then the flat float32
parameter vector.

The learner is the only writer. A reader copies the vector between two reads of ``SEQ``
and keeps the copy only when both reads are the same even number: a copy that overlapped a
write is retried, never used.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fastrl.memory.atomics import fence, load_acquire, store_release
from fastrl.memory.wait import wait_until

SEQ, VERSION = 0, 8
HEADER_BYTES = 2 * 64


class SharedWeights:
    """Seqlock-protected flat parameter vector; one writer, any number of readers."""

    def __init__(self, buf: memoryview, num_params: int) -> None:
        self.hdr = np.ndarray((HEADER_BYTES // 8,), np.int64, buffer=buf)
        self.params = np.ndarray((num_params,), np.float32, buffer=buf, offset=HEADER_BYTES)

    @staticmethod
    def nbytes(num_params: int) -> int:
        """Bytes of the segment for ``num_params`` float32 parameters."""
        return HEADER_BYTES + 4 * num_params

    def write(self, flat: np.ndarray, version: int) -> None:
        """Publish ``flat`` as policy ``version`` (learner only)."""
        seq = int(self.hdr[SEQ])
        store_release(self.hdr, SEQ, seq + 1)  # odd: readers will retry
        fence()  # keep the parameter stores below the odd SEQ
        self.params[:] = flat
        self.hdr[VERSION] = version
        store_release(self.hdr, SEQ, seq + 2)

    def _even_seq(self, should_stop: Callable[[], bool]) -> int:
        """``SEQ`` once no write is in progress (raises Stopped if the run stops first,
        e.g. because the learner died mid-write)."""
        seq = load_acquire(self.hdr, SEQ)
        while seq & 1:
            # The value returned must be the one checked: a fresh load could be odd again.
            wait_until(lambda: not load_acquire(self.hdr, SEQ) & 1, should_stop)
            seq = load_acquire(self.hdr, SEQ)
        return seq

    def version(self, should_stop: Callable[[], bool] = lambda: False) -> int:
        """Version of the last completed write (-1 before the first)."""
        while True:
            s1 = self._even_seq(should_stop)
            v = int(self.hdr[VERSION])
            fence()
            if s1 == self.hdr[SEQ]:
                return v if s1 else -1

    def read_into(self, out: np.ndarray, should_stop: Callable[[], bool] = lambda: False) -> int:
        """Copy a consistent vector into ``out``; returns its version."""
        while True:
            s1 = self._even_seq(should_stop)
            if s1 == 0:
                raise RuntimeError("no weights were published yet; wait for version() >= 0")
            np.copyto(out, self.params)
            v = int(self.hdr[VERSION])
            fence()
            if s1 == self.hdr[SEQ]:
                return v  # SEQ unchanged: no write overlapped the copy
