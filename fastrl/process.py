"""Helpers every child process uses: crash reports and the stop condition."""

from __future__ import annotations

import os
import random
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from fastrl.memory.weights import SharedWeights


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices) of this process."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def report_crash(error_dir: str, who: str) -> None:
    """Write the current exception's traceback where the supervisor will read it."""
    path = Path(error_dir) / f"{who.replace(' ', '-')}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(traceback.format_exc())


def read_crash(error_dir: str, who: str) -> str | None:
    """The traceback a crashed child left, if any."""
    path = Path(error_dir) / f"{who.replace(' ', '-')}.txt"
    return path.read_text() if path.exists() else None


def should_stop_fn(weights: SharedWeights, parent_pid: int) -> Callable[[], bool]:
    """A cheap check: the run was asked to stop, or the supervisor is gone (orphaned)."""
    return lambda: weights.stop_requested() or os.getppid() != parent_pid
