"""Seconds this process has spent compiling numba kernels: the JIT share of start-up.

fastrl's kernels are ``@njit(cache=True)``: numba compiles a kernel once for each argument
types and keeps the machine code on disk, next to the module (``__pycache__``) or, where
the package is read-only, under the user's cache directory (``~/.cache/numba``), so that
later processes and later runs load it in milliseconds. The first run on a machine (or
after the kernel's source changed) compiles; the fork server loads the kernels every child
calls once, before it forks them (fastrl.runtime.preload). This clock listens to numba's
compile events, so what it counts is compiling alone: loading a kernel from the cache
(milliseconds) happens before that event and is not counted.
"""

from __future__ import annotations

import time

from numba.core import event


class CompileClock(event.Listener):
    """Nanoseconds spent in outermost numba compilations (a kernel compiled for the one
    that calls it counts once, inside its caller's)."""

    def __init__(self) -> None:
        self.ns = 0
        self._depth = 0
        self._since = 0

    def on_start(self, ev: event.Event) -> None:
        if self._depth == 0:
            self._since = time.perf_counter_ns()
        self._depth += 1

    def on_end(self, ev: event.Event) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.ns += time.perf_counter_ns() - self._since


#: This process's clock, listening from the first import of this module
CLOCK = CompileClock()
event.register("numba:compile", CLOCK)


def compile_ns() -> int:
    """Nanoseconds this process has spent compiling numba kernels (since :func:`restart`)."""
    return CLOCK.ns


def restart() -> None:
    """Count from zero: a forked child does not inherit its parent's compiling."""
    CLOCK.ns = 0
