"""Rows as machine words, and the kernels that gather sampled rows into preallocated outputs.

Observations and actions are handled as 2-D arrays of unsigned words, one row per
transition (``as_words``): a kernel then copies any dtype and shape, with a few wide loads
per row instead of one per element.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_WORDS = tuple(map(np.dtype, (np.uint64, np.uint32, np.uint16, np.uint8)))


def as_words(a: np.ndarray, lead: int = 1) -> np.ndarray:
    """A view of C-contiguous ``a`` as words: the first ``lead`` axes kept, the rest one axis
    of the widest unsigned word that divides the row's bytes (writes go through to ``a``).
    Arrays with rows of the same bytes get the same word."""
    if not a.flags.c_contiguous:
        raise ValueError("as_words needs a C-contiguous array")
    row = math.prod(a.shape[lead:])
    word = next(w for w in _WORDS if row * a.itemsize % w.itemsize == 0)
    return a.reshape(a.shape[:lead] + (row,)).view(np.uint8).view(word)


@njit(cache=True, nogil=True, inline="always")
def copy_row(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[:] = src`` for two 1-D word rows (a plain loop: numba's slice assignment checks
    for overlap and may allocate)."""
    for k in range(src.shape[0]):
        dst[k] = src[k]


@njit(cache=True, nogil=True)
def gather_rows(idx: np.ndarray, src: tuple, dst: tuple) -> None:
    """``dst[f][i] = src[f][idx[i]]`` for the stored fields, in the order obs, action,
    next_obs (word rows), reward, done, discount (float32), stamp (int64).

    Row by row, every field of a row together, so that the loads of one sampled row are in
    flight at once. (The fields are unpacked by name: a loop over a heterogeneous tuple,
    ``literal_unroll``, made this kernel three times slower.)"""
    obs, action, next_obs, reward, done, discount, stamp = src
    o_obs, o_action, o_next_obs, o_reward, o_done, o_discount, o_stamp = dst
    for i in range(idx.shape[0]):
        j = idx[i]
        for k in range(obs.shape[1]):
            o_obs[i, k] = obs[j, k]
            o_next_obs[i, k] = next_obs[j, k]
        for k in range(action.shape[1]):
            o_action[i, k] = action[j, k]
        o_reward[i] = reward[j]
        o_done[i] = done[j]
        o_discount[i] = discount[j]
        o_stamp[i] = stamp[j]


@njit(cache=True, nogil=True)
def sample_uniform(u: np.ndarray, size: int, idx: np.ndarray, src: tuple, dst: tuple) -> None:
    """Rows ``idx[i] = floor(u[i] * size)`` (``u`` uniform in [0, 1)), gathered from ``src``
    into ``dst`` (see :func:`gather_rows`)."""
    for i in range(u.shape[0]):
        idx[i] = min(np.int64(u[i] * size), size - 1)
    gather_rows(idx, src, dst)
