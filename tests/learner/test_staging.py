"""Batch staging (fastrl.learner.staging): every stager gives the same batch, releases slots
when it says it does, and the CPU stager adds no copies."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from fastrl.learner.staging import (
    DEVICE_FIELDS,
    PER_ENV,
    CudaStager,
    HostStager,
    RawBatch,
    SyncStager,
    field_views,
    make_stager,
)
from fastrl.memory.layout import trajectory_layout
from fastrl.memory.ring import Ring, TornSlot

T, E, SLOTS = 4, 3, 3
# (a recurrent policy's on a multi-agent env: every DEVICE_FIELD, core_state and weight
# included)
LAYOUT = trajectory_layout(spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(5), T, E,
                           core_state_size=6, weighted=True)
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def make_ring(seed: int, published: int = SLOTS) -> Ring:
    """A ring in a bytearray with ``published`` slots of random data, each stamped."""
    ring = Ring(memoryview(bytearray(Ring.nbytes(LAYOUT, SLOTS))), LAYOUT, SLOTS)
    rng = np.random.default_rng(seed)
    for _ in range(published):
        for name, view in ring.write_slot().items():
            if name != "checksum":
                view[...] = rng.integers(0, 2, view.shape) if view.dtype == bool else \
                    rng.integers(0, 100, view.shape).astype(view.dtype)
        ring.stamp()
        ring.publish()
    return ring


def expected(rings: list[Ring]) -> dict[str, np.ndarray]:
    """The batch by hand: each listed ring's next unread slot, along the env axis."""
    seen: dict[int, int] = {}
    slots = []
    for r in rings:
        k = seen[id(r)] = seen.get(id(r), -1) + 1
        slots.append({n: v.copy() for n, v in r.read_slot(k).items()})
    return {n: np.concatenate([s[n] for s in slots], 0 if n in PER_ENV else 1)
            for n in DEVICE_FIELDS}


def assert_batch(batch, want: dict[str, np.ndarray]) -> None:
    """The staged batch's device tensors hold ``want``, field by field."""
    tensors = batch.use()
    for name in DEVICE_FIELDS:
        np.testing.assert_array_equal(tensors[name].cpu().numpy(), want[name], err_msg=name)


def same_rows(host: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> bool:
    """Host arrays hold the batch's values, whatever their layout (stats read them so)."""
    return all(np.array_equal(np.sort(host[n], axis=None), np.sort(want[n], axis=None))
               for n in ("reward", "terminated", "obs"))


@pytest.mark.parametrize("stager", ["host", "sync"])
def test_one_and_several_slots_give_the_concatenated_batch(stager):
    a, b = make_ring(1), make_ring(2)
    s = HostStager(LAYOUT) if stager == "host" else SyncStager(LAYOUT, torch.device("cpu"))
    for rings in ([a], [a, b], [b, a, b]):  # b twice: its next two slots
        want = expected(rings)
        batch = s.stage(rings)
        assert_batch(batch, want)
        assert same_rows(batch.host, want)
        assert batch.steps == len(rings) * T * E
        batch.done()
        for r in (a, b):  # refill what was taken
            while r.has_free_slot():
                r.write_slot()["reward"][...] = r.write_seq
                r.stamp()
                r.publish()


def test_one_slot_is_used_in_place_and_released_when_done():
    ring = make_ring(3)
    stager = HostStager(LAYOUT)
    batch = stager.stage([ring])
    slot = ring.read_slot()
    for name in DEVICE_FIELDS:  # zero copy: the tensors are the ring's memory
        assert batch.tensors[name].data_ptr() == slot[name].ctypes.data, name
    assert ring.read_seq == 0  # held while the update reads it
    batch.done()
    assert ring.read_seq == 1


def test_several_slots_are_released_at_once_into_reused_buffers():
    a, b = make_ring(4), make_ring(5)
    stager = HostStager(LAYOUT)
    first = stager.stage([a, b])
    assert (a.read_seq, b.read_seq) == (1, 1)  # copied: the workers may refill them
    ptr = first.tensors["obs"].data_ptr()
    first.done()
    second = stager.stage([a, b])
    assert second.tensors["obs"].data_ptr() == ptr  # no allocation per batch
    second.done()


def test_staging_before_the_last_batch_is_done_is_refused():
    a = make_ring(6)
    stager = HostStager(LAYOUT)
    stager.stage([a])
    with pytest.raises(RuntimeError, match="done"):
        stager.stage([a])


@pytest.mark.parametrize("stager", ["host", "sync"])
def test_a_torn_slot_is_caught_when_verifying(stager):
    a, b = make_ring(7), make_ring(8)
    b.read_slot(1)["reward"][0, 0] += 1  # b's second slot no longer matches its stamp
    s = HostStager(LAYOUT) if stager == "host" else SyncStager(LAYOUT, torch.device("cpu"))
    s.stage([a, b], verify=True).done()  # first slots intact
    with pytest.raises(TornSlot):
        s.stage([a, b], verify=True)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_raw_slot_bytes_become_the_batch(n):
    # What the CUDA stager does on the device (one memcpy per slot, one transfer, per-field
    # views and a rearrangement), checked here on the CPU.
    rings = [make_ring(20 + i) for i in range(n)]
    want = expected(rings)
    pinned = np.stack([r.read_bytes() for r in rings])
    host = field_views(pinned, LAYOUT)
    for name, view in host.items():  # [n, ...] views of every field, slot by slot
        for b, r in enumerate(rings):
            np.testing.assert_array_equal(view[b], r.read_slot()[name], err_msg=name)
    batch = RawBatch(LAYOUT, n, torch.device("cpu"))
    batch.raw.copy_(torch.from_numpy(pinned))
    batch.rearrange()
    for name in DEVICE_FIELDS:
        np.testing.assert_array_equal(batch.tensors[name].numpy(), want[name], err_msg=name)
        assert batch.tensors[name].is_contiguous()


def test_make_stager_picks_by_depth_and_device():
    assert isinstance(make_stager(LAYOUT, torch.device("cpu"), 0), SyncStager)
    assert isinstance(make_stager(LAYOUT, torch.device("cpu"), 2), HostStager)
    assert not make_stager(LAYOUT, torch.device("cpu"), 2).asynchronous


# --- CUDA: run where a GPU exists ---------------------------------------------------------
@cuda
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_cuda_stager_matches_the_synchronous_batch(depth):
    a, b = make_ring(9), make_ring(10)
    stager = CudaStager(LAYOUT, torch.device("cuda"), depth)
    for rings in ([a, b], [b, a], [a, b]):
        want = expected(rings)
        before = [r.read_seq for r in rings]
        batch = stager.stage(rings)
        assert [r.read_seq for r in rings] != before  # released once in pinned memory
        assert_batch(batch, want)
        assert same_rows(batch.host, want)
        batch.done()
        for r in (a, b):
            while r.has_free_slot():
                r.write_slot()["reward"][...] = r.write_seq
                r.stamp()
                r.publish()


@cuda
def test_cuda_stager_overlaps_copies_with_compute_and_reports_it():
    a, b = make_ring(11), make_ring(12)
    stager = CudaStager(LAYOUT, torch.device("cuda"), 2, profile=True)
    x = torch.randn(2048, 2048, device="cuda")
    batch = stager.stage([a, b])
    for _ in range(4):
        batch.use()
        for _ in range(20):
            x = torch.tanh(x @ x)  # an "update" long enough to hide the next copy
        batch.done()
        for r in (a, b):
            while r.has_free_slot():
                r.stamp()
                r.publish()
        batch = stager.stage([a, b])
    batch.use()
    batch.done()
    torch.cuda.synchronize()
    overlap = stager.overlap()
    assert overlap["copy_ms"] > 0 and 0 < overlap["hidden_share"] <= 1


@cuda
def test_ppo_update_never_waits_for_the_gpu():
    from fastrl.config import load_config
    from fastrl.models.policy import ActorCritic

    cfg = load_config(None, ["algo.num_minibatches=2"])
    obs_space, act_space = spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(5)
    for name in ("ppo", "appo"):
        cfg.algo.name = name
        policy = ActorCritic(obs_space, act_space, [16]).cuda()
        algo = cfg.algo.algorithm.make_update(cfg.algo, policy, obs_space, act_space,
                                              torch.device("cuda"))
        a, b = make_ring(13), make_ring(14)
        for r in (a, b):
            for k in range(SLOTS):
                slot = r.read_slot(k)
                slot["obs"][...] = np.clip(slot["obs"], -1, 1)
                slot["log_prob"][...] = -np.log(5)
                slot["terminated"] &= ~slot["truncated"]
                slot["action"] %= 5  # Discrete(5): an index out of range asserts on a GPU
        batch = CudaStager(LAYOUT, torch.device("cuda"), 2).stage([a, b])
        tensors = batch.use()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            stats = algo.update(tensors, 1e-3, 0)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert all(v.device.type == "cuda" for v in stats.values())
