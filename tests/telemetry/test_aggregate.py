"""fastrl.telemetry.aggregate against rliable's figures (the fixture
fixtures/rliable_intervals.json, written by rliable 1.2.0 with 500,000 replicates: see
fixtures/rliable_intervals.py)."""

import json
from pathlib import Path

import numpy as np
import pytest

from fastrl.telemetry.aggregate import (
    aggregate_iqm,
    interval_estimates,
    stratified_replicates,
)

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "rliable_intervals.json")
                     .read_text())
CASES = sorted(FIXTURE["cases"])


@pytest.mark.parametrize("case", CASES)
def test_estimates_and_intervals_are_rliable_s(case):
    want = FIXTURE["cases"][case]
    found = interval_estimates(np.array(want["scores"]), reps=200_000,
                               rng=np.random.default_rng(0))
    for stat in ("mean", "median", "iqm"):
        w = want[stat]
        assert found[stat].value == pytest.approx(w["value"], rel=1e-12), stat
        # both are Monte Carlo: bounds agree to a few percent of the interval's width (a
        # 90% interval instead of 95% is off by 5-30%)
        tol = 0.03 * (w["high"] - w["low"])
        assert found[stat].low == pytest.approx(w["low"], abs=tol), stat
        assert found[stat].high == pytest.approx(w["high"], abs=tol), stat


def test_a_replicate_draws_each_task_s_runs_apart():
    scores = np.array([[0.0, 10.0], [1.0, 11.0], [2.0, 12.0]])
    sample = stratified_replicates(scores, 4_000, np.random.default_rng(1))
    assert sample.shape == (4_000, 3, 2)
    assert set(np.unique(sample[..., 0])) == {0.0, 1.0, 2.0}
    assert set(np.unique(sample[..., 1])) == {10.0, 11.0, 12.0}
    # stratified: the two tasks' draws are independent, not whole runs (rows) together
    assert (sample[..., 1] - sample[..., 0] != 10.0).mean() > 0.5


def test_iqm_is_the_mean_of_the_middle_half():
    assert aggregate_iqm(np.arange(8.0)[:, None]) == pytest.approx(3.5)  # (2+3+4+5)/4
    # 10 scores: int(2.5) = 2 cut at each end, as scipy.stats.trim_mean(x, 0.25)
    assert aggregate_iqm(np.array([[100.0], *[[v] for v in range(9)]])) == \
        pytest.approx(np.mean([2, 3, 4, 5, 6, 7]))


def test_one_task_may_come_as_a_vector_and_seeding_repeats_it():
    scores = np.random.default_rng(3).normal(size=12)
    a = interval_estimates(scores, reps=1_000, rng=np.random.default_rng(5))
    b = interval_estimates(scores[:, None], reps=1_000, rng=np.random.default_rng(5))
    assert a == b


@pytest.mark.parametrize("scores, says", [
    (np.array([1.0, np.nan]), "finite"),
    (np.zeros((2, 2, 2)), r"\[runs, tasks\]"),
    (np.zeros((0, 1)), r"\[runs, tasks\]"),
])
def test_scores_it_cannot_aggregate_are_refused_by_name(scores, says):
    with pytest.raises(ValueError, match=says):
        interval_estimates(scores, reps=10)


@pytest.mark.parametrize("options, says", [
    ({"reps": 0}, "reps must be at least 1"),
    ({"confidence": 95}, "confidence must be a fraction"),
])
def test_bad_options_are_refused_by_name(options, says):
    with pytest.raises(ValueError, match=says):
        interval_estimates(np.ones(4), **options)
