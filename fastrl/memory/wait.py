"""Spin-then-sleep waiting, for the few places a process must wait for another."""

from __future__ import annotations

import time
from collections.abc import Callable

SPINS = 64  # checks before the first sleep; each is well under a microsecond
MIN_SLEEP_S = 20e-6
MAX_SLEEP_S = 1e-3


class Stopped(Exception):
    """A wait was abandoned because the run is stopping."""


def wait_until(
    ready: Callable[[], bool], should_stop: Callable[[], bool], timeout_s: float | None = None
) -> None:
    """Return once ``ready()`` is true.

    Spins briefly, then sleeps with exponential back-off: on a 2-core machine a hot spin
    would steal the core that produces what we wait for. Raises :class:`Stopped` when
    ``should_stop()`` turns true and :class:`TimeoutError` after ``timeout_s``.
    """
    for _ in range(SPINS):
        if ready():
            return
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    sleep = MIN_SLEEP_S
    while not ready():
        if should_stop():
            raise Stopped
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting after {timeout_s} s")
        time.sleep(sleep)
        sleep = min(sleep * 2, MAX_SLEEP_S)
