"""The off-policy learner's rate limiter (fastrl.learner.offpolicy.RateLimiter): it never
stalls, keeps the update-to-data ratio, waits for learning_starts, rebases saved counts."""

from __future__ import annotations

import numpy as np
import pytest

from fastrl.learner.offpolicy import RateLimiter


@pytest.mark.parametrize("ratio,batch,slot,error,start", [
    (32.0, 64, 256, 0.0, 1000), (256.0, 256, 64, 0.0, 1000), (0.5, 128, 1024, 1e5, 1000),
    (1.0, 32, 8, 40.0, 1000),
    (32.0, 128, 256, 0.0, 800),  # the last slot before the start overshoots it by 224 steps
    (32.0, 128, 256, 0.0, 0)])
def test_rate_limiter_never_stalls_and_keeps_the_ratio(ratio, batch, slot, error, start):
    rng = np.random.default_rng(0)
    limiter = RateLimiter(ratio, start, error, batch, slot)
    inserted = sampled = 0
    for _ in range(20_000):
        can_insert = limiter.can_insert(inserted, sampled, slot)
        can_sample = limiter.can_sample(inserted, sampled, batch)
        assert can_insert or can_sample, (inserted, sampled)  # a stall would hang the run
        # whichever side is allowed moves, in random order (fast or slow learner)
        if can_insert and (not can_sample or rng.random() < 0.5):
            inserted += slot
        else:
            sampled += batch
        if inserted >= start + slot:
            lead = ratio * (inserted - start) - sampled
            assert -limiter.error - batch <= lead <= limiter.error + ratio * slot
    assert inserted > start and sampled > 0


def test_rate_limiter_inserts_freely_until_learning_starts_and_never_samples_before():
    limiter = RateLimiter(10.0, 500, 0.0, 32, 100)
    assert limiter.can_insert(400, 0, 100) and not limiter.can_sample(499, 0, 32)
    assert limiter.can_sample(500, 0, 32)  # error >= batch/2 + ...: the first batch is free
    assert not limiter.can_sample(600, 10 * 100 + limiter.error, 32)


def test_rate_limiter_rebases_counts_saved_under_another_ratio():
    limiter = RateLimiter(8.0, 1000, 512.0, 32, 64)
    owed = 8.0 * (101_000 - 1000)
    assert limiter.rebase(101_000, 200_000) == owed - limiter.error  # was ratio 2: far behind
    assert limiter.rebase(101_000, 5_000_000) == owed + limiter.error
    assert limiter.rebase(101_000, int(owed)) == int(owed)  # unchanged ratio: unchanged
    assert limiter.can_sample(101_000, limiter.rebase(101_000, 200_000), 32)  # catches up

