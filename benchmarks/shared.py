"""Helpers the benchmark scripts share (learner_cpu.py, sac_update.py,
population_update.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def seconds_per_call(step: Callable[[], None], seconds: float) -> float:
    """Wall seconds per call of ``step``, called for about ``seconds`` after a warm-up."""
    step()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return (time.perf_counter() - t0) / n


def linears(net: torch.nn.Module) -> list[torch.nn.Linear]:
    """The Linear layers of ``net``, in order."""
    return [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
