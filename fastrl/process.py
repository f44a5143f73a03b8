"""Helpers every child process uses: start-up, seeding, crash reports."""

from __future__ import annotations

import ctypes
import os
import random
import signal
import traceback
from pathlib import Path

import numpy as np
import torch

from fastrl.rollout.envs import EnvError

PR_SET_PDEATHSIG = 1


def become_child(parent_pid: int) -> None:
    """First thing a learner or worker does.

    It ignores SIGINT and SIGTERM (a terminal's Ctrl-C or a service manager's SIGTERM reaches
    the whole process group; the supervisor turns them into a stop flag). They were blocked
    since the fork (see Supervisor._start); ignoring them discards any that came meanwhile.
    It also asks Linux to SIGKILL it when the supervisor dies, so that a hung env can never
    outlive the run.
    """
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    for sig in stop_signals:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the supervisor died before prctl took effect
        os._exit(1)


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
