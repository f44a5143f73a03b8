"""fastrl.core.jit: the clock counts the time numba spends compiling, a kernel compiled for
its caller once, and not the calls of kernels already compiled."""

from __future__ import annotations

import time

from numba import njit

from fastrl.core import jit
from fastrl.core.timing import JIT, StageTimer


def test_the_clock_counts_compiling_once_and_not_calls():
    @njit(cache=False)
    def inner(x):
        return x * 2

    @njit(cache=False)
    def outer(x):
        return inner(x) + 1

    timer = StageTimer()
    before = jit.compile_ns()
    t0 = time.perf_counter_ns()
    assert outer(3) == 7  # compiles outer, and inner inside it
    wall = time.perf_counter_ns() - t0
    spent = jit.compile_ns() - before
    assert 0 < spent <= wall  # nested compiles are not counted twice
    assert timer.seconds()[JIT] == spent / 1e9
    outer(4)
    assert jit.compile_ns() - before == spent  # a compiled kernel's calls are not compiling
