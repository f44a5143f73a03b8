"""Ring layouts derived from env spaces."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from fastrl.memory.layout import (
    ALIGN,
    UnsupportedSpace,
    final_obs_index,
    final_obs_rows,
    pack_final_obs,
    storage_of,
    trajectory_layout,
)


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


@pytest.mark.parametrize("space, role", [
    (spaces.Text(5), "observation"),
    (spaces.Dict({"a": spaces.Discrete(2)}), "action"),
    (spaces.Tuple((spaces.Discrete(2),)), "action"),
])
def test_unstorable_space_is_a_clear_error(space, role):
    with pytest.raises(UnsupportedSpace, match="Box, Discrete, MultiDiscrete and MultiBinary"):
        storage_of(space, role)


@pytest.mark.parametrize("space, leaf", [
    (spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Text(5)}), "'b'"),
    (spaces.Tuple((spaces.Discrete(2), spaces.Sequence(spaces.Discrete(2)))), "'1'"),
    (spaces.Dict({"g": spaces.Dict({"graph": spaces.Graph(spaces.Discrete(2), None)})}),
     "'g.graph'"),
])
def test_unstorable_leaf_is_named(space, leaf):
    with pytest.raises(UnsupportedSpace, match=f"leaf {leaf}"):
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
    assert views["final_obs"].shape == (7, 5, 3, 2)  # no declared limit: a row per step


@pytest.mark.parametrize("steps, limit, rows", [
    (128, None, 128), (128, 27000, 1), (128, 128, 1), (128, 127, 2), (5, 2, 3), (5, 1, 5),
])
def test_a_slot_keeps_as_many_final_observations_as_an_env_can_truncate(steps, limit, rows):
    assert final_obs_rows(steps, limit) == rows
    # the worst case: truncations exactly ``limit`` steps apart, the first at step 0
    if limit is not None:
        assert len(range(0, steps, limit)) == rows


def test_final_observations_pack_into_each_env_s_rows_in_step_order():
    truncated = np.array([[1, 0, 0], [0, 0, 1], [1, 0, 1], [0, 0, 0]], bool)  # [T=4, E=3]
    index = final_obs_index(truncated)
    assert index.tolist() == [[0, -1, -1], [-1, -1, 0], [1, -1, 1], [-1, -1, -1]]
    steps = np.arange(12, dtype=np.float32).reshape(4, 3, 1)  # step t, env e: 3t + e
    out = np.full((3, 2, 1), -1, np.float32)
    pack_final_obs(steps, truncated, out)
    assert out[..., 0].tolist() == [[0, 6], [-1, -1], [5, 8]]
    with pytest.raises(ValueError, match="2 truncated episodes of one env in 4 steps; the "
                                         "slot keeps 1 per env"):
        pack_final_obs(steps, truncated, out[:, :1])


def test_a_declared_episode_limit_shrinks_the_ring():
    obs = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    dense = trajectory_layout(obs, spaces.Discrete(6), 128, 8)
    sparse = trajectory_layout(obs, spaces.Discrete(6), 128, 8, max_episode_steps=13495)
    finals = {f.name: f for f in sparse.fields}["final_obs"]
    assert finals.shape == (8, 1, 4, 84, 84)
    assert dense.nbytes - sparse.nbytes == 127 * 8 * 4 * 84 * 84

