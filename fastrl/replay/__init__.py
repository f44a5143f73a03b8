"""Replay of n-step transitions built from trajectory slots: uniform and prioritized.

``ReplayBuffer`` stores what ``add_slot`` gets from the rings and samples uniformly;
``PrioritizedReplayBuffer`` samples proportionally to priorities kept in numba sum and min
trees; ``linear_schedule`` anneals PER's beta.
"""

from fastrl.replay.buffer import ReplayBuffer, ReplayError
from fastrl.replay.prioritized import PrioritizedReplayBuffer
from fastrl.replay.schedule import linear_schedule

__all__ = ["PrioritizedReplayBuffer", "ReplayBuffer", "ReplayError", "linear_schedule"]
