"""Dict and Tuple observations as packed records (fastrl.memory.records)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from fastrl.memory.layout import storage_of, trajectory_layout
from fastrl.memory.records import LEAF_ALIGN, ObsRecord

NESTED = spaces.Dict({
    "image": spaces.Box(0, 255, (3, 5, 4), np.uint8),
    "robot": spaces.Dict({"joints": spaces.Box(-1, 1, (7,), np.float32),
                          "mode": spaces.Discrete(3, start=-1)}),
    "extra": spaces.Tuple((spaces.MultiBinary(3), spaces.MultiDiscrete([2, 5]),
                           spaces.Box(0, 1, (2,), np.float64))),
})


def test_every_leaf_has_its_own_aligned_bytes_and_dtype():
    record = ObsRecord(NESTED)
    names = [leaf.name for leaf in record.leaves]
    assert names == ["extra.0", "extra.1", "extra.2", "image", "robot.joints", "robot.mode"]
    dtypes = {leaf.name: leaf.dtype for leaf in record.leaves}
    assert dtypes["image"] == np.uint8 and dtypes["robot.joints"] == np.float32
    assert dtypes["extra.2"] == np.float64 and dtypes["robot.mode"] == np.int64
    spans = sorted((leaf.offset, leaf.offset + leaf.nbytes) for leaf in record.leaves)
    assert all(leaf.offset % LEAF_ALIGN == 0 for leaf in record.leaves)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))
    assert record.nbytes % LEAF_ALIGN == 0 and record.nbytes >= spans[-1][1]
    assert storage_of(NESTED, "observation") == ((record.nbytes,), np.dtype(np.uint8))


def test_values_round_trip_through_records_and_views_write_in_place():
    record = ObsRecord(NESTED)
    NESTED.seed(3)
    values = [NESTED.sample() for _ in range(4)]
    rows = record.pack(values)
    views = record.views(rows)
    for i, value in enumerate(values):
        np.testing.assert_array_equal(views["image"][i], value["image"])
        np.testing.assert_array_equal(views["robot"]["joints"][i], value["robot"]["joints"])
        assert views["robot"]["mode"][i] == value["robot"]["mode"]
        np.testing.assert_array_equal(views["extra"][2][i], value["extra"][2])
    views["robot"]["joints"][2] = 0.5  # a simulator writing a leaf writes the record
    assert record.views(rows)["robot"]["joints"][2].tolist() == [0.5] * 7
    # rows of a slot [T, E, nbytes] give leaves [T, E, *shape], still views
    slot = np.zeros((2, 3, record.nbytes), np.uint8)
    image = record.views(slot)["image"]
    assert image.shape == (2, 3, 3, 5, 4) and np.shares_memory(image, slot)


def test_check_names_the_wrong_or_missing_leaf():
    record = ObsRecord(NESTED)
    NESTED.seed(0)
    good = NESTED.sample()
    assert record.check(good) is None
    bad = {**good, "robot": {**good["robot"], "joints": np.zeros(6, np.float32)}}
    assert "leaf 'robot.joints' should be a float32 array of shape (7,)" in record.check(bad)
    wrong_dtype = {**good, "image": good["image"].astype(np.float32)}
    assert "leaf 'image' should be a uint8" in record.check(wrong_dtype)
    missing = {k: v for k, v in good.items() if k != "extra"}
    assert "no leaf 'extra'" in record.check(missing)
    # a batch of values: leaves with the batch's leading dims
    batch = {"a": np.zeros((4, 2), np.float32)}
    assert ObsRecord(spaces.Dict({"a": spaces.Box(0, 1, (2,))})).check(batch, (4,)) is None


def test_a_slot_stores_records_for_obs_final_obs_and_bootstrap_obs():
    layout = trajectory_layout(NESTED, spaces.Discrete(2), 4, 3)
    fields = {f.name: f for f in layout.fields}
    nbytes = ObsRecord(NESTED).nbytes
    assert fields["obs"].shape == (4, 3, nbytes) and fields["obs"].dtype == np.uint8
    assert fields["bootstrap_obs"].shape == (3, nbytes)
    assert fields["final_obs"].shape[-1] == nbytes


def test_the_mask_is_the_top_level_action_mask_key_only():
    with_mask = ObsRecord(spaces.Dict({"action_mask": spaces.MultiBinary(4),
                                       "obs": spaces.Box(0, 1, (2,))}))
    assert with_mask.mask.name == "action_mask"
    assert [leaf.name for leaf in with_mask.feature_leaves] == ["obs"]
    nested = ObsRecord(spaces.Dict({"a": spaces.Dict({"action_mask": spaces.MultiBinary(4)})}))
    assert nested.mask is None


def test_not_a_structured_space_is_refused():
    with pytest.raises(TypeError, match="not a Dict or Tuple"):
        ObsRecord(spaces.Box(0, 1, (2,)))
