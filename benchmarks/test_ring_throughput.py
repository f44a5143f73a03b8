"""Ring overhead per slot against a plain numpy copy of the same bytes, same process.

Run: ``python -m pytest benchmarks/ --benchmark-group-by=param:rollout_len``. The ratio that
matters is ``ring_roundtrip / numpy_copy`` within one group.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from fastrl.memory.layout import trajectory_layout
from fastrl.memory.ring import Ring

OBS, ACT = spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(2)


@pytest.fixture(params=[16, 128], ids=lambda t: f"T{t}")
def rollout_len(request):
    return request.param


def make(rollout_len: int):
    layout = trajectory_layout(OBS, ACT, rollout_len, 8)
    buf = memoryview(bytearray(Ring.nbytes(layout, 4)))
    src = {f.name: np.ones(f.shape, f.dtype) for f in layout.fields}
    return Ring(buf, layout, 4), Ring(buf, layout, 4), src


def test_ring_roundtrip(benchmark, rollout_len):
    prod, cons, src = make(rollout_len)

    def roundtrip():
        slot = prod.write_slot()
        for name, arr in src.items():
            slot[name][...] = arr
        prod.publish()
        got = cons.read_slot()
        out = {name: arr.copy() for name, arr in got.items()}
        cons.release()
        return out

    roundtrip()  # compile the numba cursor kernels outside the measurement
    benchmark(roundtrip)


def test_numpy_copy(benchmark, rollout_len):
    _, _, src = make(rollout_len)
    dst = {name: np.empty_like(arr) for name, arr in src.items()}

    def copy_twice():  # what the ring does: into the slot, then out of it
        for name, arr in src.items():
            dst[name][...] = arr
        return {name: arr.copy() for name, arr in dst.items()}

    benchmark(copy_twice)
