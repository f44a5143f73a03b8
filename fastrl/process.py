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
from fastrl.rollout.envs import EnvError


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices) of this process."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def report_crash(error_dir: str, who: str, exc: BaseException) -> None:
    """Write what the supervisor will show of ``exc``: the message alone for the errors
    fastrl words itself (bad env), the full traceback for anything else."""
    path = Path(error_dir) / f"{who.replace(' ', '-')}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(exc, EnvError):
        path.write_text(f"{type(exc).__name__}: {exc}\n")
    else:
        path.write_text("".join(traceback.format_exception(exc)))


def read_crash(error_dir: str, who: str) -> str | None:
    """The traceback a crashed child left, if any."""
    path = Path(error_dir) / f"{who.replace(' ', '-')}.txt"
    return path.read_text() if path.exists() else None


def should_stop_fn(weights: SharedWeights, parent_pid: int) -> Callable[[], bool]:
    """A cheap check: the run was asked to stop, or the supervisor is gone (orphaned)."""
    return lambda: weights.stop_requested() or os.getppid() != parent_pid
