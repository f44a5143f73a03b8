"""Micro-benchmarks of fastrl.replay, each group next to its baseline in the same process.

Run: ``python -m pytest benchmarks/test_replay.py --benchmark-columns=median,iqr,rounds``
and read the ratios of the medians within a group. Targets (capacity 1,000,000, obs 4 x
float32, batch 256): prioritized sample <= 1.3x the numpy fancy-index gather of the same
rows; priority update <= cpprb's; insertion of a 64 x 32 slot >= 10M transitions/s; 84x84
uint8 frames (capacity 100,000) sample <= 1.2x np.take into preallocated arrays.
``python -m fastrl.bench --scenario replay`` measures the same in interleaved rounds and
prints the ratios.
"""

from __future__ import annotations

import numpy as np
import pytest

from fastrl.bench.replay import (
    BATCH,
    BETA,
    FRAME,
    VECTOR,
    CpprbPeer,
    Updates,
    filled_buffer,
    numpy_gather,
    numpy_take_into,
    random_slot,
)
from fastrl.replay import PrioritizedReplayBuffer, ReplayBuffer

CAPACITY, FRAMES_CAPACITY = 1_000_000, 100_000


def run(benchmark, fn, *args, rounds: int = 2000) -> None:
    """One call per round, after a warm-up: pytest-benchmark's own calibration batched some
    of these calls 100 to a round and others not, which skewed the groups' ratios."""
    benchmark.pedantic(fn, args, rounds=rounds, iterations=1, warmup_rounds=rounds // 10)


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="module")
def per(rng):
    return filled_buffer(PrioritizedReplayBuffer, CAPACITY, VECTOR, np.float32, 1, rng)


@pytest.fixture(scope="module")
def updates(rng):
    return Updates(CAPACITY, rng)


@pytest.fixture(scope="module")
def peer(updates, rng):
    pytest.importorskip("cpprb", reason="cpprb is not installed (pip install -e '.[bench]')")
    return CpprbPeer(CAPACITY, updates, rng)


@pytest.mark.benchmark(group="replay sample")
def test_prioritized_sample(benchmark, per, rng):
    run(benchmark, per.sample, BATCH, rng, BETA)


@pytest.mark.benchmark(group="replay sample")
def test_uniform_sample(benchmark, rng):
    buf = filled_buffer(ReplayBuffer, CAPACITY, VECTOR, np.float32, 1, rng)
    run(benchmark, buf.sample, BATCH, rng)


@pytest.mark.benchmark(group="replay sample")
def test_sample_baseline_numpy_gather(benchmark, per, rng):
    run(benchmark, numpy_gather(per, rng))


@pytest.mark.benchmark(group="replay update")
def test_priority_update(benchmark, per, updates):
    stamps = per.storage["stamp"][updates.idx]  # no insert into `per` in this module

    def update():
        k = updates.next()
        return per.update_priorities(updates.idx[k], updates.prio[k], stamps[k])

    assert update() == BATCH
    run(benchmark, update)


@pytest.mark.benchmark(group="replay update")
def test_priority_update_cpprb(benchmark, peer):
    run(benchmark, peer.update)


@pytest.mark.benchmark(group="replay sample+update")
def test_sample_update_loop(benchmark, per, updates, rng):
    def loop():
        batch = per.sample(BATCH, rng, BETA)
        return per.update_priorities(batch["indices"], updates.prio[0], batch["stamps"])

    run(benchmark, loop)


@pytest.mark.benchmark(group="replay sample+update")
def test_sample_update_loop_cpprb(benchmark, peer):
    run(benchmark, peer.loop)


@pytest.mark.benchmark(group="replay insert")
@pytest.mark.parametrize("n_step", [1, 3])
def test_insert_slot(benchmark, n_step, rng):
    """One 64 x 32 slot into a full buffer; transitions/s = 2048 / median."""
    buf = filled_buffer(PrioritizedReplayBuffer, CAPACITY, VECTOR, np.float32, n_step, rng)
    slot = random_slot(VECTOR, np.float32, rng)
    run(benchmark, buf.add_slot, slot)
    benchmark.extra_info["transitions_per_s"] = slot["reward"].size / benchmark.stats["median"]


@pytest.mark.benchmark(group="replay insert")
def test_insert_cpprb(benchmark, peer):
    run(benchmark, peer.add)


@pytest.fixture(scope="module")
def frames(rng):
    return filled_buffer(PrioritizedReplayBuffer, FRAMES_CAPACITY, FRAME, np.uint8, 1, rng)


@pytest.mark.benchmark(group="replay frames sample")
def test_frames_prioritized_sample(benchmark, frames, rng):
    run(benchmark, frames.sample, BATCH, rng, BETA, rounds=300)


@pytest.mark.benchmark(group="replay frames sample")
def test_frames_baseline_take_into_preallocated(benchmark, frames, rng):
    run(benchmark, numpy_take_into(frames, rng), rounds=300)
