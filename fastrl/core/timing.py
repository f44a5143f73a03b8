"""Per-stage wall time of every process, and the end-of-run table that says where it went.

The engine's stages: ``rollout`` (choosing actions, stepping envs, writing slots),
``update_dataset`` (taking slots off the rings, feeding and sampling the replay buffer,
copying batches to the learner device), ``train`` (the algorithm's gradient updates),
``sync_weights`` (publishing / reading the weights), ``waiting`` (for data, for a free slot,
for newer weights), plus ``evaluate`` and ``checkpoint``. Stages nest: time counts only for
the innermost open stage, so in the serial runtime the learner's ``waiting`` excludes the
``rollout`` that runs inside it, and the stages of one process never add up to more than its
wall time. ``jit`` is no stage: the seconds a process spent compiling numba kernels
(fastrl.core.jit), inside whichever stages called them, shown below the table.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from fastrl.core import jit

STAGES = ("rollout", "update_dataset", "train", "sync_weights", "waiting", "evaluate",
          "checkpoint")
#: Not a stage: the seconds spent compiling numba kernels, inside the stages
JIT = "jit"


class StageTimer:
    """Accumulates exclusive nanoseconds per stage (see the module doc)."""

    def __init__(self) -> None:
        self.ns = dict.fromkeys(STAGES, 0)
        self._open: list[str] = []
        self._since = 0
        self._jit_base = jit.compile_ns()  # (compiling before this timer is not its own)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Count the time inside the block (less that of stages nested in it) as ``name``."""
        now = time.perf_counter_ns()
        if self._open:
            self.ns[self._open[-1]] += now - self._since
        self._open.append(name)
        self._since = now
        try:
            yield
        finally:
            now = time.perf_counter_ns()
            self.ns[self._open.pop()] += now - self._since
            self._since = now

    def seconds(self) -> dict[str, float]:
        """``{stage: seconds}`` for every stage, and the :data:`JIT` seconds this process
        compiled since the timer was made."""
        return {**{k: v / 1e9 for k, v in self.ns.items()},
                JIT: (jit.compile_ns() - self._jit_base) / 1e9}


def timing_metrics(process: str, seconds: Mapping[str, float]) -> dict[str, float]:
    """TensorBoard scalars ``timing/<process>/<stage>_s`` from ``{stage: seconds}``."""
    return {f"timing/{process}/{stage}_s": float(s) for stage, s in seconds.items()}


def by_role(table: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """The table with its ``worker <i>`` rows replaced by their mean, ``workers (mean of N)``."""
    workers = [row for name, row in table.items() if name.startswith("worker ")]
    out = {name: dict(row) for name, row in table.items() if not name.startswith("worker ")}
    if workers:
        stages = {s for row in workers for s in row}
        out[f"workers (mean of {len(workers)})"] = {
            s: sum(row.get(s, 0.0) for row in workers) / len(workers) for s in stages}
    return out


def verdict(table: Mapping[str, Mapping[str, float]]) -> str:
    """One line: is the run env-bound, learner-bound, or mostly waiting?"""
    roles = by_role(table)
    learner = roles.get("learner", {})
    workers = next((row for name, row in roles.items() if name.startswith("workers")), {})
    if not learner or not workers:
        return ""
    learner_wall = sum(learner.get(s, 0.0) for s in STAGES) or 1.0
    worker_wall = sum(workers.get(s, 0.0) for s in STAGES) or 1.0
    busy = sum(learner.get(s, 0.0) for s in ("update_dataset", "train", "sync_weights"))
    if learner.get("waiting", 0.0) / learner_wall > 0.5 and \
            workers.get("rollout", 0.0) / worker_wall > 0.5:
        return ("env-bound: the learner waits for data most of the time while the workers "
                "step envs; more workers or envs per worker (or a faster env) go faster")
    if busy / learner_wall > 0.5 and workers.get("waiting", 0.0) / worker_wall > 0.3:
        return ("learner-bound: the learner trains most of the time while the workers wait; "
                "a faster device, fewer epochs per batch or a smaller network go faster")
    return "balanced: neither the envs nor the learner keep the other waiting for long"


def format_table(table: Mapping[str, Mapping[str, float]]) -> str:
    """``{process: {stage: seconds}}`` as text: a row per stage, a column per process (the
    workers averaged), each cell with its share of the column's total; a row of the seconds
    compiling numba kernels within those (:data:`JIT`); then the :func:`verdict`."""
    columns = by_role(table)
    stages = [s for s in STAGES if any(row.get(s, 0.0) for row in columns.values())]
    widths = [max(len(name), 13) for name in columns]
    lines = [f"{'stage':<15}" + "".join(f" {n:>{w}}" for n, w in zip(columns, widths))]
    totals = [sum(row.get(s, 0.0) for s in stages) or 1.0 for row in columns.values()]
    for stage in stages + ["total"]:
        cells = []
        for row, total, w in zip(columns.values(), totals, widths):
            sec = total if stage == "total" else row.get(stage, 0.0)
            cells.append(f" {f'{sec:.2f}s {sec / total:4.0%}':>{w}}")
        lines.append(f"{stage:<15}" + "".join(cells))
    lines.append(f"{'(numba jit)':<15}" + "".join(
        f" {f'{row.get(JIT, 0.0):.2f}s     ':>{w}}" for row, w in zip(columns.values(), widths)))
    note = verdict(table)
    return "\n".join(lines + ([note] if note else []))
