"""A zero-sum game's results: win and draw rates, and the scripted opponent evaluations
play against."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fastrl.envs.source import load_factory
from fastrl.selfplay.config import SelfPlayConfig


def win_rates(returns: np.ndarray) -> dict[str, float]:
    """``win_rate`` and ``draw_rate`` of a zero-sum game's returns: above, and at, zero."""
    returns = np.asarray(returns)
    return {"win_rate": float((returns > 0).mean()), "draw_rate": float((returns == 0).mean())}


def training_win_rates(returns: np.ndarray) -> dict[str, float]:
    """``selfplay/win_rate`` and ``selfplay/draw_rate`` of the learner's training games
    (a report's extra statistics, fastrl.learner.report)."""
    return {f"selfplay/{k}": v for k, v in win_rates(returns).items()}


def baseline_of(selfplay: SelfPlayConfig, envs: Any, seed: int) -> Callable | None:
    """Self-play's scripted opponent for an evaluation from ``seed``: ``selfplay.baseline``,
    else the env's own (its ``baseline`` attribute); None (the policy plays itself) when
    there is neither."""
    factory = load_factory(selfplay.baseline, "selfplay.baseline") if selfplay.baseline \
        else getattr(envs, "baseline", None)
    return None if factory is None else factory(seed)
