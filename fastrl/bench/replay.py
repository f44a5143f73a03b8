"""The ``replay`` scenario: fastrl.replay next to a baseline, timed in the same process.

Each comparison runs its two sides in alternating rounds (A B, then B A, ...) for the
window's duration after a warm-up; a round times a block of calls (about 10 ms) of each
side. Reported: each side's median time per call and the median over rounds of their ratio
(fastrl / baseline: below 1 is fastrl ahead), so that a noisy machine slows both sides of a
round alike. The first calls, which compile the numba kernels or load them from numba's
cache, are timed apart from the steady state.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fastrl.bench.measure import Result, skipped
from fastrl.replay import PrioritizedReplayBuffer, ReplayBuffer, nstep, rows, sumtree

try:
    import cpprb
except ImportError:  # an optional peer (the bench extra)
    cpprb = None

BATCH, T, E = 256, 64, 32  # sample size; insertion slot: T steps x E envs
VECTOR, FRAME = (4,), (84, 84)
BETA = 0.4
POOL = 4096  # index batches for the update comparison: fresh rows every call
NO_CPPRB = "cpprb is not installed (pip install -e '.[bench]')"


@dataclass
class Side:
    """One side of a comparison: a zero-argument call and how many transitions one call
    samples, updates or inserts."""

    name: str
    call: Callable[[], object]
    items: int


@dataclass
class Comparison:
    """fastrl against a baseline (None: skipped because of ``skip``, or nothing to compare
    with), and the targets that say whether fastrl is fast enough."""

    key: str  # short name, prefixes the rows' system names
    what: str
    fastrl: Side
    baseline: Side | None
    max_ratio: float | None = None  # fastrl / baseline time per call
    min_rate: float | None = None  # fastrl transitions per second
    skip: str = ""


@dataclass
class Timings:
    """What :func:`interleave` measured, per side."""

    per_call: np.ndarray  # [rounds, sides] seconds per call in each round
    calls: np.ndarray  # calls made in all rounds
    wall: np.ndarray  # seconds spent in them
    cpu: np.ndarray  # CPU seconds spent in them


def interleave(sides: list[Side], warmup_s: float, duration_s: float,
               block_s: float = 0.01) -> Timings:
    """Alternating rounds of a block of calls of each side (at least 5 rounds)."""
    deadline = time.perf_counter() + warmup_s
    while time.perf_counter() < deadline:
        for side in sides:
            side.call()
    n = len(sides)
    block = []
    for side in sides:  # calls per block, from one timed call
        t0 = time.perf_counter()
        side.call()
        block.append(max(1, int(block_s / max(time.perf_counter() - t0, 1e-7))))
    per_call, calls, wall, cpu = [], np.zeros(n), np.zeros(n), np.zeros(n)
    deadline = time.perf_counter() + duration_s
    while time.perf_counter() < deadline or len(per_call) < 5:
        order = range(n) if len(per_call) % 2 == 0 else range(n - 1, -1, -1)
        times = np.zeros(n)
        for k in order:
            call = sides[k].call
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(block[k]):
                call()
            elapsed = time.perf_counter() - t0
            cpu[k] += time.process_time() - c0
            wall[k] += elapsed
            calls[k] += block[k]
            times[k] = elapsed / block[k]
        per_call.append(times)
    return Timings(np.array(per_call), calls, wall, cpu)


def measure(cmp: Comparison, warmup_s: float, duration_s: float) -> list[Result]:
    """A row for each side; fastrl's note carries the ratio and whether the targets hold."""
    sides = [cmp.fastrl] + ([cmp.baseline] if cmp.baseline else [])
    gc.collect()
    got = interleave(sides, warmup_s, duration_s)
    median = np.median(got.per_call, axis=0)
    out = []
    for k, side in enumerate(sides):
        items = side.items * got.calls[k]
        out.append(Result(
            f"replay {cmp.key}: {side.name}", "replay", 1, 0, int(items), float(got.wall[k]),
            float(got.cpu[k]), side.items / median[k], items / got.cpu[k] if got.cpu[k] else 0.0,
            got.cpu[k] / got.wall[k], {}, f"{cmp.what}: median {1e6 * median[k]:,.1f} µs/call"))
    verdicts = []
    if cmp.baseline:
        ratio = float(np.median(got.per_call[:, 0] / got.per_call[:, 1]))
        verdicts.append(f"{ratio:.2f}x {cmp.baseline.name}"
                        + ("" if cmp.max_ratio is None else
                           f" (target <= {cmp.max_ratio}x: {_met(ratio <= cmp.max_ratio)})"))
    elif cmp.skip:
        out.append(skipped(f"replay {cmp.key}: baseline", "replay", 1, 0, cmp.skip))
    if cmp.min_rate is not None:
        rate = out[0].steps_per_sec
        verdicts.append(f"{rate / 1e6:.1f}M transitions/s (target >= {cmp.min_rate / 1e6:.0f}M:"
                        f" {_met(rate >= cmp.min_rate)})")
    out[0].note = "; ".join([out[0].note, *verdicts])
    return out


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


# -- fixtures ------------------------------------------------------------------------------


def random_slot(obs_shape: tuple[int, ...], dtype,
                rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A random T x E slot whose envs continue into the next copy of it (its bootstrap obs is
    its first obs), with an episode end now and then."""
    if np.dtype(dtype) == np.uint8:
        obs = rng.integers(0, 256, (T, E, *obs_shape), dtype=np.uint8)
    else:
        obs = rng.standard_normal((T, E, *obs_shape)).astype(dtype)
    return {"obs": obs, "action": rng.integers(0, 4, (T, E)),
            "reward": rng.standard_normal((T, E)).astype(np.float32),
            "terminated": rng.random((T, E)) < 0.01, "truncated": rng.random((T, E)) < 0.005,
            "final_obs": obs.swapaxes(0, 1).copy(), "bootstrap_obs": obs[0].copy(),
            "env_id": np.broadcast_to(np.arange(E, dtype=np.int32), (T, E)).copy()}


def filled_buffer(cls, capacity: int, obs_shape, dtype, n_step: int, rng) -> ReplayBuffer:
    """A full buffer (wrapped once), with random priorities when prioritized."""
    buf = cls(capacity, obs_shape, dtype, (), np.int64, E, n_step=n_step)
    slot = random_slot(obs_shape, dtype, rng)
    while buf.inserted < capacity + T * E:
        buf.add_slot(slot)
    if isinstance(buf, PrioritizedReplayBuffer):
        every = np.arange(buf.size)
        buf.update_priorities(every, rng.exponential(1.0, buf.size) + 1e-3,
                              buf.storage["stamp"][every])
    return buf


class Updates:
    """``POOL`` batches of random rows and priorities, handed out in turn: fresh rows every
    call, as after a sample (a few batches reused would keep their tree paths in cache)."""

    def __init__(self, capacity: int, rng: np.random.Generator) -> None:
        self.idx = rng.integers(capacity, size=(POOL, BATCH))
        self.prio = rng.exponential(1.0, (POOL, BATCH)) + 1e-3
        self.turn = 0

    def next(self) -> int:
        """The number of the next batch."""
        self.turn = (self.turn + 1) % POOL
        return self.turn


class CpprbPeer:
    """cpprb's PrioritizedReplayBuffer with fastrl's fields, full, random priorities, and
    the calls its sides make."""

    def __init__(self, capacity: int, updates: Updates, rng: np.random.Generator) -> None:
        self.buf = cpprb.PrioritizedReplayBuffer(capacity, env_dict={
            "obs": {"shape": VECTOR}, "act": {"dtype": np.int64}, "rew": {},
            "next_obs": {"shape": VECTOR}, "done": {}}, alpha=0.6, eps=1e-6)
        n = T * E
        obs = rng.standard_normal((n, *VECTOR)).astype(np.float32)
        self.batch = {"obs": obs, "act": rng.integers(0, 4, n), "rew": rng.standard_normal(n),
                      "next_obs": obs, "done": (rng.random(n) < 0.01).astype(np.float32)}
        for _ in range(-(-capacity // n) + 1):
            self.buf.add(**self.batch)
        self.buf.update_priorities(np.arange(capacity), rng.exponential(1.0, capacity) + 1e-3)
        self.updates = updates

    def update(self) -> None:
        """update_priorities of the next batch of :class:`Updates`."""
        k = self.updates.next()
        self.buf.update_priorities(self.updates.idx[k], self.updates.prio[k])

    def loop(self) -> None:
        """One step of a training loop: sample, then update those rows' priorities."""
        batch = self.buf.sample(BATCH, beta=BETA)
        self.buf.update_priorities(batch["indexes"], self.updates.prio[0])

    def add(self) -> None:
        """Add one slot's worth of transitions (T x E)."""
        self.buf.add(**self.batch)


def numpy_gather(buf: ReplayBuffer, rng) -> Callable[[], object]:
    """The baseline: 256 random rows of obs, action, reward, next_obs, done by numpy fancy
    indexing (fresh arrays each call)."""
    s = buf.storage
    obs, act, rew, nxt, done = (s[k] for k in ("obs", "action", "reward", "next_obs", "done"))

    def gather():
        idx = rng.integers(buf.size, size=BATCH)
        return obs[idx], act[idx], rew[idx], nxt[idx], done[idx]
    return gather


def numpy_take_into(buf: ReplayBuffer, rng) -> Callable[[], object]:
    """The baseline for frames: the same rows copied by ``np.take`` into preallocated
    arrays (no allocation per call)."""
    s = buf.storage
    keys = ("obs", "action", "reward", "next_obs", "done")
    out = {k: np.empty((BATCH, *s[k].shape[1:]), s[k].dtype) for k in keys}

    def take():
        idx = rng.integers(buf.size, size=BATCH)
        for k in keys:
            np.take(s[k], idx, axis=0, out=out[k])
        return out
    return take


def _kernel_stats() -> tuple[int, int]:
    """(kernel signatures loaded from numba's cache, compiled) so far in this process."""
    hits = misses = 0
    for module in (rows, sumtree, nstep):
        for obj in vars(module).values():
            stats = getattr(obj, "stats", None)
            if stats is not None and hasattr(stats, "cache_hits"):
                hits += sum(stats.cache_hits.values())
                misses += sum(stats.cache_misses.values())
    return hits, misses


def first_calls(rng) -> Result:
    """The first add_slot / sample / update_priorities of small buffers, vectors and frames,
    uniform and prioritized: numba compiles the kernels, or loads them from its on-disk
    cache (cache=True)."""
    t0, c0 = time.perf_counter(), time.process_time()
    for shape, dtype in ((VECTOR, np.float32), (FRAME, np.uint8)):
        for cls in (ReplayBuffer, PrioritizedReplayBuffer):
            buf = filled_buffer(cls, 2 * T * E, shape, dtype, 3, rng)
            kw = {"beta": BETA} if cls is PrioritizedReplayBuffer else {}
            batch = buf.sample(BATCH, rng, **kw)
            if kw:
                buf.update_priorities(batch["indices"], np.ones(BATCH), batch["stamps"])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    hits, misses = _kernel_stats()
    return Result("replay first calls", "replay", 1, 0, 0, wall, cpu, 0.0, 0.0,
                  cpu / wall if wall else 0.0, {},
                  f"first calls (JIT or cache load), apart from the timings below: {wall:.2f} s;"
                  f" kernels loaded from numba's cache: {hits}, compiled: {misses}")


def comparisons(capacity: int, frames_capacity: int, rng) -> list[Comparison]:
    """Every comparison of the scenario, with its fixtures built (full buffers)."""
    per = filled_buffer(PrioritizedReplayBuffer, capacity, VECTOR, np.float32, 1, rng)
    per3 = filled_buffer(PrioritizedReplayBuffer, capacity, VECTOR, np.float32, 3, rng)
    uni = filled_buffer(ReplayBuffer, capacity, VECTOR, np.float32, 1, rng)
    slot = random_slot(VECTOR, np.float32, rng)
    updates = Updates(capacity, rng)
    stamps = per.storage["stamp"][updates.idx]  # they hold while nothing is added to `per`

    def per_update():
        k = updates.next()
        return per.update_priorities(updates.idx[k], updates.prio[k], stamps[k])

    def per_loop():
        batch = per.sample(BATCH, rng, BETA)
        return per.update_priorities(batch["indices"], updates.prio[0], batch["stamps"])

    peer = CpprbPeer(capacity, updates, rng) if cpprb else None
    skip = "" if peer else NO_CPPRB

    def peer_side(name: str, call: str, items: int) -> Side | None:
        return Side(name, getattr(peer, call), items) if peer else None

    insert1 = Side("fastrl PER add_slot n=1", lambda: per.add_slot(slot), T * E)
    vec = f"capacity {capacity:,}, obs 4 x float32, batch {BATCH}"
    ins = f"slot {T}x{E} into a full PER buffer, capacity {capacity:,}"
    out = [
        Comparison("sample", f"prioritized sample ({vec})",
                   Side("fastrl PER sample", lambda: per.sample(BATCH, rng, BETA), BATCH),
                   Side("numpy fancy-index gather", numpy_gather(per, rng), BATCH), 1.3),
        Comparison("uniform", f"uniform sample ({vec})",
                   Side("fastrl uniform sample", lambda: uni.sample(BATCH, rng), BATCH),
                   Side("numpy fancy-index gather", numpy_gather(uni, rng), BATCH)),
        Comparison("update", f"priority update ({vec})",
                   Side("fastrl PER update", per_update, BATCH),
                   peer_side("cpprb update_priorities", "update", BATCH), 1.0, skip=skip),
        Comparison("loop", f"sample + update loop ({vec})",
                   Side("fastrl PER sample+update", per_loop, BATCH),
                   peer_side("cpprb sample+update", "loop", BATCH), skip=skip),
        # inserts last: they overwrite rows of `per`, whose stamps per_update holds
        Comparison("insert n=1", f"insert n=1 ({ins})", insert1,
                   peer_side("cpprb PER add", "add", T * E), min_rate=10e6, skip=skip),
        # n=1 as the baseline: what n-step windows cost, and rounds that share the noise
        Comparison("insert n=3", f"insert n=3 ({ins})",
                   Side("fastrl PER add_slot n=3", lambda: per3.add_slot(slot), T * E),
                   insert1, min_rate=10e6),
    ]
    if frames_capacity:
        frames = filled_buffer(PrioritizedReplayBuffer, frames_capacity, FRAME, np.uint8, 1, rng)
        out.append(Comparison(
            "frames", f"prioritized sample (capacity {frames_capacity:,}, obs 84x84 uint8, "
            f"batch {BATCH})",
            Side("fastrl PER sample", lambda: frames.sample(BATCH, rng, BETA), BATCH),
            Side("np.take into preallocated", numpy_take_into(frames, rng), BATCH), 1.2))
    return out


def run_replay(capacity: int, frames_capacity: int, warmup_s: float, duration_s: float,
               seed: int = 0) -> Iterator[Result]:
    """Every row of the scenario as it is measured (so that an interrupted bench keeps
    them): the first-call cost, then both sides of each comparison. ``frames_capacity`` 0
    leaves the 84x84 frames out."""
    rng = np.random.default_rng(seed)
    yield first_calls(rng)
    for cmp in comparisons(capacity, frames_capacity, rng):
        yield from measure(cmp, warmup_s, duration_s)


def print_replay(results: list[Result]) -> None:
    """The scenario's table: rates, and the notes with medians, ratios and targets."""
    t = Table(title="fastrl replay (medians of interleaved rounds; ratio = fastrl / baseline "
                    "time per call)")
    t.add_column("system")
    t.add_column("transitions/s", justify="right")
    t.add_column("note")
    for r in results:
        t.add_row(escape(r.system), f"{r.steps_per_sec:,.0f}" if r.steps_per_sec else "",
                  escape(r.note))
    Console(width=max(Console().width, 150)).print(t)
