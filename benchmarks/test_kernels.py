"""Micro-benchmarks of the hot kernels: slot write, slot read, seqlock weight copy, GAE.

Run: ``python -m pytest benchmarks/ --benchmark-columns=median,iqr,rounds``. Each group has
a plain-numpy baseline of the same bytes, run in the same process: read the ratios.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from fastrl.algos.ppo import compute_gae
from fastrl.memory.layout import trajectory_layout
from fastrl.memory.ring import Ring
from fastrl.memory.weights import SharedWeights

OBS, ACT, T, E = spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(2), 64, 16


@pytest.fixture
def ring_pair():
    layout = trajectory_layout(OBS, ACT, T, E)
    buf = memoryview(bytearray(Ring.nbytes(layout, 4)))
    src = {f.name: np.ones(f.shape, f.dtype) for f in layout.fields}
    prod, cons = Ring(buf, layout, 4), Ring(buf, layout, 4)
    prod.publish(), cons.release()  # compile the numba kernels before measuring
    return prod, cons, src


@pytest.mark.benchmark(group="slot write")
def test_slot_write(benchmark, ring_pair):
    prod, cons, src = ring_pair

    def write():
        slot = prod.write_slot()
        for name, arr in src.items():
            slot[name][...] = arr
        prod.publish()
        cons.release()

    benchmark(write)


@pytest.mark.benchmark(group="slot write")
def test_slot_write_baseline_numpy(benchmark, ring_pair):
    _, _, src = ring_pair
    dst = {k: np.empty_like(v) for k, v in src.items()}
    benchmark(lambda: [np.copyto(dst[k], v) for k, v in src.items()])


@pytest.mark.benchmark(group="slot read")
def test_slot_read(benchmark, ring_pair):
    prod, cons, _ = ring_pair

    def read():
        prod.publish()
        out = {k: v.copy() for k, v in cons.read_slot().items()}
        cons.release()
        return out

    benchmark(read)


@pytest.mark.benchmark(group="slot read")
def test_slot_read_baseline_numpy(benchmark, ring_pair):
    _, _, src = ring_pair
    benchmark(lambda: {k: v.copy() for k, v in src.items()})


N_PARAMS = 1_000_000


@pytest.mark.benchmark(group="weights copy")
def test_seqlock_weight_copy(benchmark):
    w = SharedWeights(memoryview(bytearray(SharedWeights.nbytes(N_PARAMS))), N_PARAMS)
    w.write(np.ones(N_PARAMS, np.float32), 1)
    out = np.empty(N_PARAMS, np.float32)
    benchmark(w.read_into, out)


@pytest.mark.benchmark(group="weights copy")
def test_weight_copy_baseline_numpy(benchmark):
    src, out = np.ones(N_PARAMS, np.float32), np.empty(N_PARAMS, np.float32)
    benchmark(np.copyto, out, src)


@pytest.mark.benchmark(group="gae")
def test_gae_kernel(benchmark):
    g = torch.Generator().manual_seed(0)
    r, v, nv = (torch.rand(128, 64, generator=g) for _ in range(3))
    term, trunc = torch.rand(128, 64, generator=g) < 0.01, torch.rand(128, 64, generator=g) < 0.01
    benchmark(compute_gae, r, v, nv, term, trunc, 0.99, 0.95)
