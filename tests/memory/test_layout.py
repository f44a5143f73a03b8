"""Ring layouts derived from env spaces."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from fastrl.memory.layout import ALIGN, UnsupportedSpace, storage_of, trajectory_layout


@pytest.mark.parametrize("space, shape, dtype", [
    (spaces.Box(0, 255, (4, 5, 3), np.uint8), (4, 5, 3), np.uint8),
    (spaces.Box(-1, 1, (2,), np.float64), (2,), np.float64),
    (spaces.Discrete(7), (), np.int64),
    (spaces.MultiDiscrete([3, 4, 5]), (3,), np.int64),
    (spaces.MultiBinary(6), (6,), np.int8),
    (spaces.MultiBinary([2, 3]), (2, 3), np.int8),
])
def test_storage_follows_the_space(space, shape, dtype):
    assert storage_of(space, "observation") == (shape, np.dtype(dtype))
    # and every value the space can produce round-trips through that storage
    buf = np.zeros(shape, dtype)
    sample = space.sample()
    buf[...] = sample
    assert np.array_equal(buf, np.asarray(sample))


@pytest.mark.parametrize("space", [
    spaces.Dict({"a": spaces.Discrete(2)}),
    spaces.Tuple((spaces.Discrete(2),)),
    spaces.Text(5),
])
def test_unstorable_space_is_a_clear_error(space):
    with pytest.raises(UnsupportedSpace, match="Box, Discrete, MultiDiscrete and MultiBinary"):
        storage_of(space, "observation")


def test_trajectory_layout_fields_are_aligned_and_disjoint():
    layout = trajectory_layout(spaces.Box(0, 1, (3, 2), np.float32), spaces.Discrete(4), 5, 7)
    spans = []
    for f in layout.fields:
        off = layout.offsets[f.name]
        assert off % ALIGN == 0
        spans.append((off, off + f.nbytes))
    spans.sort()
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    assert layout.nbytes >= spans[-1][1]
    views = layout.views(memoryview(bytearray(layout.nbytes * 2)), layout.nbytes)
    assert views["obs"].shape == (5, 7, 3, 2)
    assert views["action"].shape == (5, 7) and views["action"].dtype == np.int64
    assert views["bootstrap_obs"].shape == (7, 3, 2)
    assert views["final_obs"].shape == (5, 7, 3, 2)
