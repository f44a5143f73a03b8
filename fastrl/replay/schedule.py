"""Schedules of a hyper-parameter over training steps (PER's beta annealing)."""

from __future__ import annotations

from collections.abc import Callable


def linear_schedule(start: float, end: float, duration: float) -> Callable[[float], float]:
    """``step -> value``: ``start`` at step 0, moving linearly to ``end`` at ``duration``,
    and held there (clamped on both sides)."""
    if not duration > 0:
        raise ValueError(f"duration must be > 0, got {duration!r}")

    def value(step: float) -> float:
        return start + (end - start) * min(max(step / duration, 0.0), 1.0)

    return value
