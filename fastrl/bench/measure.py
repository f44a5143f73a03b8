"""Measurement windows: env steps, wall time and the CPU time of every process of a run."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import psutil


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """user+system CPU seconds of each live process in ``pids``."""
    out = {}
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        out[pid] = t.user + t.system
    return out


def run_pids() -> list[int]:
    """This process and all its descendants: every process of a run started from here."""
    me = psutil.Process()
    return [me.pid, *(p.pid for p in me.children(recursive=True))]


@dataclass
class Snapshot:
    """What is known at one instant of a run."""

    t: float
    steps: int
    cpu: dict[int, float]
    stages: dict[str, int] = field(default_factory=dict)  # act_ns / env_ns / fill_ns


def snapshot(steps: int, stages: dict[str, int] | None = None) -> Snapshot:
    """The current time, ``steps`` and the CPU time of every process of the run."""
    return Snapshot(time.monotonic(), steps, cpu_seconds(run_pids()), stages or {})


@dataclass
class Result:
    """One system measured in one configuration; every figure the report shows."""

    system: str
    scenario: str
    workers: int  # processes that step envs
    envs: int  # envs stepped in all
    steps: int
    wall_s: float
    cpu_s: float
    steps_per_sec: float
    steps_per_cpu_s: float
    cores_used: float
    stage_share: dict[str, float] = field(default_factory=dict)
    note: str = ""
    # fastrl runs: where the window's time and CPU went (cores by process role, ms per slot)
    costs: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        """Plain data for the JSON report."""
        return asdict(self)


def summarize(system: str, scenario: str, workers: int, envs: int, start: Snapshot,
              end: Snapshot) -> Result:
    """The figures of the window between two snapshots.

    CPU time is summed over the processes present at both ends (the run's processes live
    through the whole window); ``cores_used`` is CPU seconds per wall second.
    """
    wall = end.t - start.t
    steps = end.steps - start.steps
    cpu = sum(end.cpu[pid] - start.cpu[pid] for pid in start.cpu if pid in end.cpu)
    share = {}
    fill = end.stages.get("fill_ns", 0) - start.stages.get("fill_ns", 0)
    if fill > 0:
        act = end.stages["act_ns"] - start.stages["act_ns"]
        env = end.stages["env_ns"] - start.stages["env_ns"]
        share = {"act": act / fill, "env": env / fill, "write": 1 - (act + env) / fill}
    return Result(system, scenario, workers, envs, steps, wall, cpu,
                  steps / wall if wall > 0 else 0.0, steps / cpu if cpu > 0 else 0.0,
                  cpu / wall if wall > 0 else 0.0, share)


def skipped(system: str, scenario: str, workers: int, envs: int, why: str) -> Result:
    """A row for a peer or scenario that could not run here, with the reason."""
    return Result(system, scenario, workers, envs, 0, 0.0, 0.0, 0.0, 0.0, 0.0, {},
                  f"skipped: {why}")


def failed(job, note: str) -> Result:
    """A row for a measurement that raised; ``job`` is the ``functools.partial`` that ran."""
    name = getattr(job, "func", job).__name__
    return Result(name, "", 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, {}, note)
