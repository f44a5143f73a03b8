"""Per-env random streams for the numba simulators: splitmix64, one uint64 state per env."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def uniform(rng: np.ndarray, i: int) -> float:
    """Next float in [0, 1) of env ``i``'s splitmix64 stream."""
    rng[i] += np.uint64(0x9E3779B97F4A7C15)
    z = rng[i]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)) * (1.0 / 9007199254740992.0)
