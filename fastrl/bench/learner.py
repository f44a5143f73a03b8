"""The ``learner`` scenario: the real Learner's training throughput with batch staging on
(``infra.staging_depth=2``) and off (``0``: a fresh concatenation and a blocking transfer
per batch), measured in the same run.

No worker runs. Every ring is a :class:`LoopbackRing`: its slots, filled once with synthetic
data valid for the env's spaces, are published again as soon as the learner releases them,
so a batch is always ready and the figure is the learner's own: samples/s, transitions
trained per second. As slots never go stale here, on CUDA the next batch is always staged
while an update runs, as with APPO or PPO with ``infra.max_policy_lag`` >= 1 in a real run
(strict PPO, lag 0, has no batch ready before it publishes its weights).

The two sides run in alternating rounds (on off, then off on, ...); each round trains a
fresh Learner, measured from its first metrics report after ``warmup_s`` to the first one
``duration_s`` later. Reported: each side's median and the median over rounds of on/off (a
noisy machine slows both sides of a round alike). On CUDA the "on" side's stager records
timing events (``CudaStager(profile=True)``), and its note says how much of the copy time
ran while an update was computing.
"""

from __future__ import annotations

import copy
import gc
import os
import tempfile
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector.utils import batch_space
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fastrl.bench.measure import Result
from fastrl.config import MainConfig, load_config
from fastrl.core.process import keep_freed_memory, learner_torch
from fastrl.learner.learner import Learner, LearnerSpec
from fastrl.learner.staging import CudaStager, Stager
from fastrl.memory.control import RunControl
from fastrl.memory.layout import PER_ENV, SlotLayout
from fastrl.memory.records import obs_record
from fastrl.memory.ring import Ring
from fastrl.memory.weights import SharedWeights
from fastrl.plan import RunPlan, plan_run

#: scenario name -> algo.name it trains
LEARNER_SCENARIOS = {"learner": "ppo", "learner-appo": "appo"}
DEPTHS = {"on": 2, "off": 0}  # infra.staging_depth of each side
NEVER = 10**12  # steps: no evaluation, checkpoint, stale slot or end of run inside a round
# Several reports per round to measure between; not 0, which syncs the GPU every update.
METRICS_EVERY_S = 0.1


class LoopbackRing(Ring):
    """A ring that is its own producer: a released slot is published again at once, same
    bytes, so its consumer always finds every slot ready. Once ``control`` says the run is
    over, released slots stay released, as when the workers exit: the learner then runs out
    of data, waits, and sees the stop request."""

    def __init__(self, buf: memoryview, layout: SlotLayout, slots: int,
                 control: RunControl) -> None:
        super().__init__(buf, layout, slots)
        self.control = control

    @classmethod
    def filled(cls, layout: SlotLayout, slots: int, control: RunControl,
               slot: dict[str, np.ndarray]) -> LoopbackRing:
        """A ring in process memory whose every slot holds ``slot`` and is published."""
        ring = cls(memoryview(bytearray(Ring.nbytes(layout, slots))), layout, slots, control)
        for _ in range(slots):
            views = ring.write_slot()
            for name, value in slot.items():
                views[name][...] = value
            ring.publish()
        return ring

    def release(self) -> None:
        """Hand the slot back, and publish it again while the run goes on."""
        super().release()
        if not self.control.run_over():
            # The ring was full, so the slot to publish next is the one just released.
            self.publish()


def synthetic_slot(plan: RunPlan, seed: int = 0) -> dict[str, np.ndarray]:
    """One slot a worker could have written for ``plan``: observations and actions sampled
    from the env's spaces, finite rewards, log-probabilities and values, an episode end now
    and then, every step acted by policy version 0 (arrays that broadcast to the fields'
    shapes; the fields not named stay zero)."""
    t, e = plan.cfg.infra.rollout_len, plan.cfg.infra.envs_per_worker
    rng = np.random.default_rng(seed)
    fields = {f.name: f for f in plan.layout.fields}

    def sampled(name: str, space: spaces.Space, count: int) -> np.ndarray:
        field = fields[name]
        record = obs_record(space)
        if record is not None:  # (a Dict or Tuple: records of sampled values)
            space = copy.deepcopy(space)
            space.seed(int(rng.integers(2**31)))
            return record.pack([space.sample() for _ in range(count)]).reshape(field.shape)
        batched = batch_space(space, count)
        batched.seed(int(rng.integers(2**31)))
        return np.asarray(batched.sample(), field.dtype).reshape(field.shape)

    rows = fields["final_obs"].shape[1]  # final observations kept per env
    terminated = rng.random((t, e)) < 0.01
    truncated = ~terminated & (rng.random((t, e)) < 0.005)
    truncated &= np.cumsum(truncated, axis=0) <= rows
    steps_in = np.arange(1, t + 1)[:, None]  # running episode lengths
    return {
        "obs": sampled("obs", plan.obs_space, t * e),
        "final_obs": sampled("final_obs", plan.obs_space, e * rows),
        "bootstrap_obs": sampled("bootstrap_obs", plan.obs_space, e),
        "action": sampled("action", plan.act_space, t * e),
        "reward": rng.standard_normal((t, e)), "terminated": terminated,
        "truncated": truncated,
        "log_prob": -rng.exponential(1.0, (t, e)), "value": rng.standard_normal((t, e)),
        "env_id": np.arange(e), "episode_length": steps_in, "episode_return": steps_in,
        "policy_version": np.zeros((t, e), np.int64),
    }


def synthetic_batch(plan: RunPlan, slots: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """A learner's batch of ``slots`` different :func:`synthetic_slot` side by side, as it
    stages them: time-major ``[T, slots * E]`` (the per-env fields ``[slots * E, ...]``)."""
    fields = {f.name: f for f in plan.layout.fields}
    made = [synthetic_slot(plan, seed + s) for s in range(slots)]
    return {name: torch.from_numpy(np.concatenate(
        [np.broadcast_to(np.asarray(m[name], fields[name].dtype), fields[name].shape)
         for m in made], 0 if name in PER_ENV else 1)) for name in made[0]}


class Mark(NamedTuple):
    """One metrics report: when (monotonic and process CPU seconds) and at which step."""

    t: float
    cpu: float
    step: int


@dataclass
class Window:
    """What one side measured in one round."""

    steps: int
    wall_s: float
    cpu_s: float


class RoundClock:
    """The learner's ``metrics`` in one round: marks its ``update`` reports, opens the
    window at the first report ``warmup_s`` after the first one, closes it at the first
    ``duration_s`` after that with steps trained in between, and then asks the learner to
    stop."""

    def __init__(self, control: RunControl, warmup_s: float, duration_s: float) -> None:
        self.control, self.warmup_s, self.duration_s = control, warmup_s, duration_s
        self.first: Mark | None = None
        self.start: Mark | None = None
        self.window: Window | None = None

    def put(self, message: tuple[str, int, dict]) -> None:
        """Take one learner message (only ``update`` reports matter)."""
        kind, step, _ = message
        if kind != "update" or self.window is not None:
            return
        now = Mark(time.monotonic(), time.process_time(), step)
        if self.first is None:
            self.first = now
        elif self.start is None:
            if now.t - self.first.t >= self.warmup_s:
                self.start = now
        elif now.t - self.start.t >= self.duration_s and now.step > self.start.step:
            self.window = Window(now.step - self.start.step, now.t - self.start.t,
                                 now.cpu - self.start.cpu)
            self.control.request_stop()


@dataclass
class Round:
    """One side's round: its window, which stager trained, and on CUDA the overlap of its
    copies with compute (CudaStager.overlap)."""

    window: Window
    stager: str
    overlap: dict[str, float]


def learner_config(scenario: str, env_id: str, env_kwargs: dict, workers: int,
                   envs_per_worker: int, rollout_len: int, depth: int) -> MainConfig:
    """The config of one side: ``workers`` rings, staging ``depth``, and nothing in a round
    but training (no evaluation, checkpoint, stale slot or end)."""
    cfg = load_config(None, [
        f"algo.name={LEARNER_SCENARIOS[scenario]}", f"env.id={env_id}",
        f"infra.num_workers={workers}", f"infra.envs_per_worker={envs_per_worker}",
        f"infra.rollout_len={rollout_len}", f"infra.staging_depth={depth}",
        f"infra.max_policy_lag={NEVER}", "infra.deterministic=false",
        f"algo.total_steps={NEVER}",
        "algo.target_return=null", f"log.eval_every_steps={NEVER}",
        f"log.checkpoint_every_steps={NEVER}", "log.eval_episodes=1", "log.eval_max_steps=10",
        "log.tensorboard=false", "log.console=false", f"log.run_dir={tempfile.gettempdir()}",
        f"log.metrics_every_s={METRICS_EVERY_S}",
    ])
    cfg.env.kwargs = dict(env_kwargs)
    return cfg


def train_one_round(plan: RunPlan, slot: dict[str, np.ndarray], warmup_s: float,
                    duration_s: float) -> Round:
    """Train a fresh Learner on loopback rings of ``slot`` until its window is measured."""
    cfg = plan.cfg
    weights = SharedWeights(memoryview(bytearray(SharedWeights.nbytes(plan.num_params))),
                            plan.num_params)
    control = RunControl(memoryview(bytearray(plan.control_bytes)))
    control.mark_parked()  # no worker runs: the final checkpoint waits for none to park
    rings = [LoopbackRing.filled(plan.layout, cfg.infra.ring_slots, control, slot)
             for _ in range(cfg.infra.num_workers)]
    clock = RoundClock(control, warmup_s, duration_s)
    gc.collect()  # not inside the window
    keep_freed_memory()  # (as the learner process does; this process is the bench's own)
    with learner_torch(cfg.infra.learner_threads), \
            tempfile.TemporaryDirectory(prefix="fastrl-bench-learner-") as run_dir:
        learner = Learner(LearnerSpec(plan, [], "", "", run_dir, os.getpid()), clock, rings,
                          weights, control)
        if learner.device.type == "cuda" and cfg.infra.staging_depth:
            learner.feed.stager = CudaStager(plan.layout, learner.device,
                                             cfg.infra.staging_depth, profile=True)
        learner.run()
    if clock.window is None:
        raise RuntimeError("the learner stopped before its measurement window closed")
    stager = learner.feed.stager
    return Round(clock.window, type(stager).__name__, copy_overlap(stager))


def copy_overlap(stager: Stager) -> dict[str, float]:
    """A CudaStager's :meth:`~CudaStager.overlap` once its work is done; {} for others."""
    if not isinstance(stager, CudaStager):
        return {}
    torch.cuda.synchronize(stager.device)
    return stager.overlap()


@dataclass
class SideResult:
    """One side's median row and its row of each round (the JSON report's repeats)."""

    median: Result
    rounds: list[Result]


def run_learner(scenario: str, env_id: str, env_kwargs: dict, workers: int,
                envs_per_worker: int, rollout_len: int, warmup_s: float, duration_s: float,
                rounds: int, label_env: bool = False) -> list[SideResult]:
    """Staging on and off in ``rounds`` alternating rounds; the "on" row's note has the
    median on/off ratio and, on CUDA, the copy time hidden behind compute."""
    plans = {side: plan_run(learner_config(scenario, env_id, env_kwargs, workers,
                                           envs_per_worker, rollout_len, depth))
             for side, depth in DEPTHS.items()}
    slot = synthetic_slot(plans["on"])
    got: dict[str, list[Round]] = {side: [] for side in plans}
    for r in range(rounds):
        for side in (list(plans) if r % 2 == 0 else list(plans)[::-1]):
            got[side].append(train_one_round(plans[side], slot, warmup_s, duration_s))
    name = f"fastrl {scenario}" + (f" [{env_id}]" if label_env else "")
    device = plans["on"].device
    out = {side: side_result(f"{name} staging {side}", scenario, workers,
                             workers * envs_per_worker, device, rs) for side, rs in got.items()}
    rate = {side: np.array([r.window.steps / r.window.wall_s for r in rs])
            for side, rs in got.items()}
    ratio = float(np.median(rate["on"] / rate["off"]))
    out["on"].median.note += f"; on/off {ratio:.2f}x (median of per-round ratios)" + \
        overlap_note([r.overlap for r in got["on"]])
    return list(out.values())


def side_result(system: str, scenario: str, workers: int, envs: int, device: str,
                rounds: list[Round]) -> SideResult:
    """A row per round, and the median row: the median samples/s, the other figures summed
    over rounds."""
    rows = [Result(system, scenario, workers, envs, r.window.steps, r.window.wall_s,
                   r.window.cpu_s, r.window.steps / r.window.wall_s,
                   r.window.steps / r.window.cpu_s if r.window.cpu_s > 0 else 0.0,
                   r.window.cpu_s / r.window.wall_s, {}, f"{r.stager} on {device}")
            for r in rounds]
    steps, wall = sum(r.steps for r in rows), sum(r.wall_s for r in rows)
    cpu = sum(r.cpu_s for r in rows)
    median = Result(system, scenario, workers, envs, steps, wall, cpu,
                    float(np.median([r.steps_per_sec for r in rows])),
                    steps / cpu if cpu > 0 else 0.0, cpu / wall,
                    {}, f"{rows[0].note}; median of {len(rows)} rounds")
    return SideResult(median, rows)


def overlap_note(overlaps: list[dict[str, float]]) -> str:
    """The copy time of every round together and the share of it hidden behind compute
    ("" off CUDA)."""
    measured = [o for o in overlaps if o]
    if not measured:
        return ""
    copy = sum(o["copy_ms"] for o in measured)
    hidden = sum(o["hidden_ms"] for o in measured)
    share = hidden / copy if copy > 0 else 0.0
    return f"; copies {copy:.1f} ms in all, {share:.0%} of it hidden behind compute"


def print_learner(results: list[Result]) -> None:
    """The scenario's table: samples/s of each side, and the notes with ratio and overlap."""
    t = Table(title="fastrl learner (samples/s: transitions trained per second; medians of "
                    "alternating staging on/off rounds)")
    for col in ("system", "rings", "envs", "samples/s", "samples/CPU-s", "note"):
        t.add_column(col, justify="left" if col in ("system", "note") else "right")
    for r in results:
        t.add_row(escape(r.system), str(r.workers), str(r.envs),
                  f"{r.steps_per_sec:,.0f}" if r.steps_per_sec else "",
                  f"{r.steps_per_cpu_s:,.0f}" if r.steps_per_cpu_s else "", escape(r.note))
    Console(width=max(Console().width, 150)).print(t)
