"""Policy weights in shared memory: one or more banks, each a flat float32 parameter vector
under a seqlock of its own (the run's flags are fastrl.memory.control's).

The learner writes the weights of a *key* into bank ``key % banks``: the key is the weights
version (the number of updates behind them), or, for the replay algorithms in deterministic
mode, the index of the slot they are meant for (fastrl.plan.SlotSchedule.weights_key). With one
bank each write replaces the last and workers take the newest; with more
(``infra.deterministic``), a worker reads the very key its next slot is collected with, which
stays in its bank until the learner has taken that slot.

Layout: a header line ``LATEST`` (key + 1 of the newest complete write; 0 before the
first), then per bank a header line (``SEQ``: odd while the learner writes; ``KEY``: its
key + 1; ``VERSION``: the version of those weights) and its vector, 64-byte aligned.

The learner is the only writer. A reader copies a bank's vector between two reads of its
``SEQ`` and keeps the copy only when both reads are the same even number and the bank still
holds the key it wanted: a copy that overlapped a write is retried, never used.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from fastrl.memory.atomics import fence, load_acquire, store_release
from fastrl.memory.wait import wait_until

LINE = 64
LATEST = 0
SEQ, KEY, VERSION = 0, 1, 2  # words of a bank's header line


def _never() -> bool:
    return False


class KeyOverwritten(RuntimeError):
    """The weights of a key were replaced before a reader took them (a protocol error: the
    banks are sized so that this cannot happen)."""


class SharedWeights:
    """Seqlocked weights in ``banks`` banks; one writer, any number of readers."""

    def __init__(self, buf: memoryview, num_params: int, banks: int = 1) -> None:
        self.banks = banks
        stride = self.bank_bytes(num_params)
        self.latest = np.ndarray((LINE // 8,), np.int64, buffer=buf)
        self.headers = [np.ndarray((LINE // 8,), np.int64, buffer=buf, offset=LINE + b * stride)
                        for b in range(banks)]
        self.vectors = [np.ndarray((num_params,), np.float32, buffer=buf,
                                   offset=2 * LINE + b * stride) for b in range(banks)]

    @staticmethod
    def bank_bytes(num_params: int) -> int:
        """Bytes of one bank: its header line and its vector, padded to a line."""
        return LINE + -(-4 * num_params // LINE) * LINE

    @classmethod
    def nbytes(cls, num_params: int, banks: int = 1) -> int:
        """Bytes of the segment for ``banks`` banks of ``num_params`` float32 parameters."""
        return LINE + banks * cls.bank_bytes(num_params)

    def write(self, flat: np.ndarray, version: int, key: int | None = None) -> None:
        """Publish ``flat``, the weights of ``version``, under ``key`` (default: the
        version) (learner only)."""
        key = version if key is None else key
        hdr = self.headers[key % self.banks]
        seq = int(hdr[SEQ])
        store_release(hdr, SEQ, seq + 1)  # odd: readers will retry
        fence()  # keep the parameter stores below the odd SEQ
        self.vectors[key % self.banks][:] = flat
        hdr[KEY], hdr[VERSION] = key + 1, version
        store_release(hdr, SEQ, seq + 2)
        if key + 1 > self.latest[LATEST]:
            store_release(self.latest, LATEST, key + 1)

    def latest_key(self) -> int:
        """The key of the newest complete write (-1 before the first)."""
        return int(load_acquire(self.latest, LATEST)) - 1

    def has(self, key: int) -> bool:
        """The weights of ``key`` (or a later one in its bank) are published."""
        return int(load_acquire(self.headers[key % self.banks], KEY)) - 1 >= key

    def _read(self, key: int, out: np.ndarray | None,
              should_stop: Callable[[], bool]) -> int | None:
        """The version of ``key``'s weights, copied into ``out`` when given; None when its
        bank holds an older key. Raises KeyOverwritten when it holds a newer one, Stopped
        if the run stops while a write is in progress (the learner died mid-write)."""
        b = key % self.banks
        hdr = self.headers[b]
        while True:
            seq = load_acquire(hdr, SEQ)
            if seq & 1:
                wait_until(lambda: not load_acquire(hdr, SEQ) & 1, should_stop)
                continue
            held, version = int(hdr[KEY]) - 1, int(hdr[VERSION])
            if held == key and out is not None:
                np.copyto(out, self.vectors[b])
            fence()
            if seq != hdr[SEQ]:
                continue  # a write overlapped: retry
            if held < key:
                return None
            if held > key:
                raise KeyOverwritten(f"the weights of key {key} were replaced by key {held} "
                                     f"before they were read ({self.banks} banks)")
            return version

    def version(self, should_stop: Callable[[], bool] = _never) -> int:
        """Version of the newest complete write (-1 before the first)."""
        while True:
            key = self.latest_key()
            if key < 0:
                return -1
            try:
                version = self._read(key, None, should_stop)
            except KeyOverwritten:
                continue  # a newer key landed in the same bank: look again
            if version is not None:
                return version

    def read_into(self, out: np.ndarray, should_stop: Callable[[], bool] = _never) -> int:
        """Copy the newest weights into ``out``; returns their version."""
        while True:
            key = self.latest_key()
            if key < 0:
                raise RuntimeError("no weights were published yet; wait for version() >= 0")
            try:
                version = self._read(key, out, should_stop)
            except KeyOverwritten:
                continue
            if version is not None:
                return version

    def read_key(self, key: int, out: np.ndarray,
                 should_stop: Callable[[], bool] = _never) -> int:
        """Copy the weights of ``key`` into ``out`` once they are published; returns their
        version. Raises KeyOverwritten when they were replaced first."""
        while True:
            version = self._read(key, out, should_stop)
            if version is not None:
                return version
            wait_until(lambda: self.has(key), should_stop)

    def held(self) -> list[tuple[int, int, np.ndarray]]:
        """``(key, version, vector)`` of every bank written, keys ascending (the writer's
        view: call it between two writes of the same process)."""
        found = [(int(h[KEY]) - 1, int(h[VERSION]), v.copy())
                 for h, v in zip(self.headers, self.vectors) if h[KEY]]
        return sorted(found, key=lambda kv: kv[0])

    def banks_state(self) -> dict:
        """The weights every bank holds, for the learner's checkpoint state: a resumed
        deterministic run gives its workers the very weights their slots' keys had."""
        held = self.held()
        return {"keys": [k for k, _, _ in held], "versions": [v for _, v, _ in held],
                "vectors": torch.from_numpy(np.stack([x for _, _, x in held]))}

    def restore_banks(self, saved: dict | None) -> None:
        """Write back what :meth:`banks_state` saved (nothing for a checkpoint without it)."""
        if saved:
            for key, version, vector in zip(saved["keys"], saved["versions"],
                                            saved["vectors"]):
                self.write(vector.cpu().numpy(), version, key)
