"""Which seat of each two-player game learns."""

from __future__ import annotations

import numpy as np


def learning_rows(first_env: int, rows: int) -> np.ndarray:
    """``[rows]`` True at the learner's rows of two-row envs that start at run-wide env
    ``first_env``: env ``g``'s learner sits in seat ``g % 2``, so that both seats are
    learnt."""
    envs = np.arange(rows // 2)
    learning = np.zeros(rows, np.bool_)
    learning[2 * envs + (first_env + envs) % 2] = True
    return learning
