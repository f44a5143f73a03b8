"""Scores of several runs (seeds, or a population's members) aggregated as Agarwal et al.
(2021, "Deep reinforcement learning at the edge of the statistical precipice") report
them: the mean, the median and the interquartile mean (IQM), each with a
stratified-bootstrap confidence interval.

The definitions are rliable's (``rliable.metrics`` and ``rliable.library``): scores are a
``[runs, tasks]`` matrix; the mean and median are those of the per-task means over runs;
the IQM is the mean of the middle half of all scores (``scipy.stats.trim_mean`` at 0.25);
a bootstrap replicate resamples each task's runs with replacement, independently of the
other tasks, and the interval is the replicates' percentiles. rliable itself needs arch,
pandas and seaborn, so this module computes the same in numpy, vectorised over
replicates; tests/telemetry/test_aggregate.py checks it against rliable's figures on a
fixture.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: statistics of a ``[..., runs, tasks]`` array over its last two axes
Statistic = Callable[[np.ndarray], np.ndarray]

CELLS_PER_CHUNK = 4_000_000  # replicate cells drawn at a time (about 100 MB of indices
# and scores), whatever the runs and tasks


def aggregate_mean(scores: np.ndarray) -> np.ndarray:
    """The mean over tasks of each task's mean score over runs."""
    return scores.mean(axis=-2).mean(axis=-1)


def aggregate_median(scores: np.ndarray) -> np.ndarray:
    """The median over tasks of each task's mean score over runs (with one task, its
    mean: rliable's definition)."""
    return np.median(scores.mean(axis=-2), axis=-1)


def aggregate_iqm(scores: np.ndarray) -> np.ndarray:
    """The interquartile mean of all scores: the mean of what is left after cutting the
    lowest and highest quarter (``int(0.25 * n)`` scores each) off the sorted scores."""
    flat = np.sort(scores.reshape(*scores.shape[:-2], -1), axis=-1)
    cut = int(0.25 * flat.shape[-1])
    return flat[..., cut:flat.shape[-1] - cut].mean(axis=-1)


STATISTICS: dict[str, Statistic] = {
    "mean": aggregate_mean, "median": aggregate_median, "iqm": aggregate_iqm}


@dataclass(frozen=True)
class Estimate:
    """A statistic's point estimate and the bounds of its confidence interval."""

    value: float
    low: float
    high: float


def stratified_replicates(scores: np.ndarray, reps: int,
                          rng: np.random.Generator) -> np.ndarray:
    """``reps`` bootstrap replicates ``[reps, runs, tasks]`` of ``scores``: every cell a
    run of the same task drawn with replacement, each task apart."""
    runs, tasks = scores.shape
    picks = rng.integers(0, runs, size=(reps, runs, tasks))
    return scores[picks, np.arange(tasks)]


def interval_estimates(scores: np.ndarray, statistics: dict[str, Statistic] | None = None,
                       reps: int = 50_000, confidence: float = 0.95,
                       rng: np.random.Generator | None = None) -> dict[str, Estimate]:
    """Each statistic of ``scores`` ``[runs, tasks]`` (one task: ``[runs]``) with its
    percentile interval over ``reps`` stratified-bootstrap replicates."""
    if reps < 1:
        raise ValueError(f"reps must be at least 1, not {reps}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be a fraction between 0 and 1 (0.95 for a 95% "
                         f"interval), not {confidence}")
    scores = np.asarray(scores, np.float64)
    if scores.ndim == 1:
        scores = scores[:, None]
    if scores.ndim != 2 or scores.shape[0] == 0 or scores.shape[1] == 0:
        raise ValueError(f"scores must be [runs, tasks] (or [runs]) with at least one of "
                         f"each, not an array of shape {scores.shape}")
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite (a NaN or infinite score has no place in "
                         "a mean)")
    statistics = STATISTICS if statistics is None else statistics
    rng = np.random.default_rng() if rng is None else rng
    values: dict[str, list[np.ndarray]] = {name: [] for name in statistics}
    chunk = max(1, CELLS_PER_CHUNK // scores.size)
    for start in range(0, reps, chunk):
        sample = stratified_replicates(scores, min(chunk, reps - start), rng)
        for name, statistic in statistics.items():
            values[name].append(statistic(sample))
    tail = 100 * (1 - confidence) / 2
    out = {}
    for name, statistic in statistics.items():
        low, high = np.percentile(np.concatenate(values[name]), [tail, 100 - tail])
        out[name] = Estimate(float(statistic(scores)), float(low), float(high))
    return out
