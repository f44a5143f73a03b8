"""Ordered 8-byte loads and stores on shared int64 counters, compiled with numba.

Python gives no memory-ordering guarantee of its own, so every cursor and seqlock access
goes through these three kernels. Each emits an LLVM ``fence seq_cst`` around a plain
aligned 8-byte access:

- an aligned 8-byte load or store is a single instruction on x86-64 and aarch64, so a
  reader never sees half of a counter;
- ``store_release`` fences *before* the store: every write to the slot (or weights) that
  came before it in program order is visible to another core before the new counter is;
- ``load_acquire`` fences *after* the load: the reader's later reads of the slot cannot be
  satisfied before it saw the counter.

On x86-64 (TSO: stores are not reordered with stores, loads not with loads) the fences only
stop the compiler; on aarch64 they become ``dmb ish``, which the weaker model needs.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def _fence(typingctx):  # noqa: ARG001 - numba passes the typing context
    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


@njit(cache=True, nogil=True)
def fence() -> None:
    """Full memory barrier."""
    _fence()


@njit(cache=True, nogil=True)
def store_release(a: np.ndarray, i: int, value: int) -> None:
    """``a[i] = value`` after every earlier memory access is visible."""
    _fence()
    a[i] = value


@njit(cache=True, nogil=True)
def load_acquire(a: np.ndarray, i: int) -> int:
    """``a[i]``, before any later memory access is performed."""
    v = a[i]
    _fence()
    return v


def warm_up() -> None:
    """Load the three kernels (from numba's cache, or compile them) for the int64 counters
    they serve. The first call in a process costs ~0.2 s of numba and LLVM start-up: a
    process that forks children (the fork server) calls this first, so that none of them
    pays it."""
    counters = np.zeros(1, np.int64)
    store_release(counters, 0, 1)
    load_acquire(counters, 0)
    fence()
