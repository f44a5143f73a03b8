"""Rows as machine words, and the kernel that gathers sampled rows into preallocated outputs.

Every stored field is handled as a 2-D array of unsigned words, one row per transition
(``as_words``): one compiled kernel then copies any observation or action dtype, with a
few wide loads per row instead of one per element.
"""

from __future__ import annotations

import numpy as np
from numba import literal_unroll, njit

_WORDS = (np.uint64, np.uint32, np.uint16, np.uint8)


def as_words(a: np.ndarray, lead: int = 1) -> np.ndarray:
    """A view of C-contiguous ``a`` as words: the first ``lead`` axes kept, the rest one axis
    of the widest unsigned word that divides the row's bytes (writes go through to ``a``)."""
    if not a.flags.c_contiguous:
        raise ValueError("as_words needs a C-contiguous array")
    row_bytes = int(np.prod(a.shape[lead:], dtype=np.int64)) * a.itemsize
    flat = a.reshape(a.shape[:lead] + (row_bytes // a.itemsize,))
    word = next(w for w in _WORDS if row_bytes % np.dtype(w).itemsize == 0)
    return flat.view(np.uint8).view(word)


@njit(cache=True, nogil=True, inline="always")
def copy_row(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[:] = src`` for two 1-D word rows (a plain loop: numba's slice assignment checks
    for overlap and may allocate)."""
    for k in range(src.shape[0]):
        dst[k] = src[k]


@njit(cache=True, nogil=True)
def gather_rows(idx: np.ndarray, pairs: tuple) -> None:
    """For every ``(src, dst)`` word-array pair: ``dst[i] = src[idx[i]]``.

    Row by row, all fields of one row together, so the loads of one sampled row's fields
    are in flight at once."""
    for i in range(idx.shape[0]):
        j = idx[i]
        for pair in literal_unroll(pairs):
            copy_row(pair[1][i], pair[0][j])


@njit(cache=True, nogil=True)
def sample_uniform(u: np.ndarray, size: int, idx: np.ndarray, pairs: tuple) -> None:
    """Rows ``idx[i] = floor(u[i] * size)`` (``u`` uniform in [0, 1)), gathered into
    ``pairs`` (see :func:`gather_rows`)."""
    for i in range(u.shape[0]):
        idx[i] = min(np.int64(u[i] * size), size - 1)
    gather_rows(idx, pairs)
