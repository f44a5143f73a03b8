"""Process helpers (fastrl.core.process): RNG states round-trip through a weights-only
checkpoint."""

from __future__ import annotations

import random

import numpy as np
import torch

from fastrl.core.process import rng_state, set_rng_state


def test_rng_states_round_trip_through_a_weights_only_checkpoint(tmp_path):
    torch.save(rng_state(), tmp_path / "rng.pt")
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first

