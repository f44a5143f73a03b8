"""The learner's slot selection (fastrl.learner.learner): stale slots are dropped and
counted; APPO takes its batch's slots from the rings in turns."""

from __future__ import annotations

import numpy as np
import pytest

from fastrl.learner.feeds import drop_stale, take_turns
from fastrl.memory.layout import Field, SlotLayout
from fastrl.memory.ring import Ring


def test_stale_slots_are_dropped_and_counted_fresh_ones_kept():
    layout = SlotLayout([Field("policy_version", (4, 2), np.dtype(np.int64))])
    buf = memoryview(bytearray(Ring.nbytes(layout, 4)))
    prod, cons = Ring(buf, layout, 4), Ring(buf, layout, 4)
    for version in (3, 5, 7, 8):
        prod.write_slot()["policy_version"][:] = version
        prod.publish()
    # learner at version 9, bound 2: slots of versions 3 and 5 are too old, 7 is fine
    assert drop_stale([cons], version=9, max_lag=2) == 2
    assert int(cons.read_slot()["policy_version"].min()) == 7 and cons.occupancy() == 2
    assert drop_stale([cons], version=9, max_lag=2) == 0


def test_appo_takes_turns_across_rings():
    assert take_turns([2, 0, 1], 2, 0) == ([0, 2], 0)
    # the turn carries over: ring 0 is not drained first every time
    assert take_turns([2, 2, 2], 2, 1) == ([1, 2], 0)
    assert take_turns([3, 0, 0], 3, 1) == ([0, 0, 0], 1)
    with pytest.raises(ValueError, match="3 slots wanted, 2 ready"):
        take_turns([1, 1], 3, 0)

