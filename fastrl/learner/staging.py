"""Batch staging: on-policy ring slots -> tensors on the learner's device.

An on-policy update trains on B ring slots of ``[T, E]`` steps each; the algorithms read the
batch time-major, ``[T, B*E]`` (``bootstrap_obs``: ``[B*E]``). A stager makes that batch and
releases the slots to their workers as early as it can:

- :class:`CudaStager` (``infra.staging_depth`` >= 1 on CUDA): a pool of ``depth`` entries,
  each a pinned host buffer of B raw slots and device buffers. Staging copies each slot's
  bytes into pinned memory in one memcpy (no per-field loop) and releases the slot at once;
  then, on a dedicated copy stream, it transfers the bytes with ``non_blocking=True`` and
  rearranges ``[B, T, E]`` into ``[T, B*E]`` on the device. Events order the streams: the
  compute stream waits for exactly its batch (:meth:`StagedBatch.use`), and an entry's
  buffers are overwritten only after the compute stream is done with them
  (:meth:`StagedBatch.done`). While batch k trains, batch k+1 is copied.
- :class:`HostStager` (``staging_depth`` >= 1 on the CPU): no extra copies. One slot is used
  in place, tensors viewing the ring's memory (released by ``done()``); B > 1 slots are
  copied once, into ``[T, B*E]`` buffers reused from batch to batch, and released at once.
- :class:`SyncStager` (``staging_depth=0``): the baseline the bench compares against: a
  fresh concatenation and a blocking transfer per batch.

``StagedBatch.host`` holds every field of the batch on the host, for statistics (episode
returns, policy versions): aligned across fields, in any layout (``[T, B*E]`` or
``[B, T, E]``), valid until ``done()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from fastrl.memory.layout import PER_ENV, SlotLayout
from fastrl.memory.ring import Ring
from fastrl.models.encoders import torch_dtype

#: The fields the on-policy updates read on the device (those a slot has: core_state
#: only a recurrent policy's, weight only a weighted one's; episode_return, a population's
#: PBT, its members' fitness); the others stay on the host.
DEVICE_FIELDS = ("obs", "action", "reward", "terminated", "truncated", "log_prob", "value",
                 "final_obs", "bootstrap_obs", "core_state", "weight", "episode_return")


@dataclass
class StagedBatch:
    """One update's batch: ``tensors`` on the device (after :meth:`use`), ``host`` arrays
    for statistics, ``steps`` transitions; call :meth:`done` once the update that reads it
    has been issued."""

    tensors: dict[str, torch.Tensor]
    host: dict[str, np.ndarray]
    steps: int
    _use: Callable[[], None] = field(default=lambda: None, repr=False)
    _done: Callable[[], None] = field(default=lambda: None, repr=False)

    def use(self) -> dict[str, torch.Tensor]:
        """The device tensors, once the current stream may read them."""
        self._use()
        return self.tensors

    def done(self) -> None:
        """The update that reads this batch has been issued: its memory may be reused."""
        self._done()


def make_stager(layout: SlotLayout, device: torch.device, depth: int) -> Stager:
    """The stager ``infra.staging_depth`` asks for on ``device``."""
    if depth == 0:
        return SyncStager(layout, device)
    if device.type == "cuda":
        return CudaStager(layout, device, depth)
    return HostStager(layout)


class Stager:
    """Turns the read slots of a list of rings into a :class:`StagedBatch`.

    ``stage(rings)`` takes the slot at each ring's read cursor in list order (a ring listed
    twice gives its next slot the second time), CRC-checks it first when ``verify``.
    """

    asynchronous = False  # staging a batch may overlap the update of the one before

    def __init__(self, layout: SlotLayout) -> None:
        self.layout = layout
        self.fields = [f for f in layout.fields if f.name != "checksum"]
        self.slot_steps = int(np.prod(layout.shape_of("reward")))  # T * E

    def stage(self, rings: list[Ring], verify: bool = False) -> StagedBatch:
        """The batch of one slot from each of ``rings``."""
        raise NotImplementedError


def _take(ring: Ring, verify: bool, ahead: int = 0) -> dict[str, np.ndarray]:
    if verify:
        ring.verify(ahead)
    return ring.read_slot(ahead)


def _read_slots(rings: list[Ring], verify: bool) -> list[dict[str, np.ndarray]]:
    """The slot at each listed ring's read cursor; a ring listed twice gives the slot after
    the one before (nothing is released yet)."""
    ahead: dict[int, int] = {}
    slots = []
    for ring in rings:
        k = ahead[id(ring)] = ahead.get(id(ring), -1) + 1
        slots.append(_take(ring, verify, k))
    return slots


def _concatenate(fields: list, slots: list[dict[str, np.ndarray]],
                 out: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Every field of ``slots`` concatenated along the env axis (into ``out`` if given)."""
    return {f.name: np.concatenate([s[f.name] for s in slots], _env_axis(f.name),
                                   out=None if out is None else out[f.name])
            for f in fields}


def _env_axis(name: str) -> int:
    """The axis along which the slots of field ``name`` are concatenated: envs."""
    return 0 if name in PER_ENV else 1


class SyncStager(Stager):
    """``staging_depth=0``: concatenate (a fresh copy), release, transfer synchronously."""

    def __init__(self, layout: SlotLayout, device: torch.device) -> None:
        super().__init__(layout)
        self.device = device

    def stage(self, rings: list[Ring], verify: bool = False) -> StagedBatch:
        host = _concatenate(self.fields, _read_slots(rings, verify))
        for ring in rings:
            ring.release()
        tensors = {k: torch.from_numpy(host[k]).to(self.device)
                   for k in DEVICE_FIELDS if k in host}
        return StagedBatch(tensors, host, len(rings) * self.slot_steps)


class HostStager(Stager):
    """CPU staging without extra copies (see the module documentation)."""

    def __init__(self, layout: SlotLayout) -> None:
        super().__init__(layout)
        self._buffers: dict[int, dict[str, np.ndarray]] = {}  # per slot count
        self._outstanding = False

    def stage(self, rings: list[Ring], verify: bool = False) -> StagedBatch:
        if self._outstanding:
            raise RuntimeError("HostStager: done() the last batch before staging the next")
        self._outstanding = True
        if len(rings) == 1:
            ring = rings[0]
            host = _take(ring, verify)
            return StagedBatch(self._tensors(host), host, self.slot_steps,
                               _done=lambda: self._finish(ring))
        host = _concatenate(self.fields, _read_slots(rings, verify),
                            self._buffers_for(len(rings)))
        for ring in rings:
            ring.release()
        return StagedBatch(self._tensors(host), host, len(rings) * self.slot_steps,
                           _done=self._finish)

    def _finish(self, ring: Ring | None = None) -> None:
        if ring is not None:
            ring.release()
        self._outstanding = False

    @staticmethod
    def _tensors(host: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        return {k: torch.from_numpy(host[k]) for k in DEVICE_FIELDS if k in host}

    def _buffers_for(self, n: int) -> dict[str, np.ndarray]:
        if n not in self._buffers:
            self._buffers[n] = {f.name: np.empty(_batch_shape(f.name, f.shape, n), f.dtype)
                                for f in self.fields}
        return self._buffers[n]


def _batch_shape(name: str, shape: tuple[int, ...], n: int) -> tuple[int, ...]:
    """A field's batch shape for ``n`` slots of per-slot ``shape``."""
    if name in PER_ENV:
        return (n * shape[0], *shape[1:])
    return (shape[0], n * shape[1], *shape[2:])


def field_views(raw: np.ndarray, layout: SlotLayout) -> dict[str, np.ndarray]:
    """Every field of the ``n`` slots held as raw bytes in ``raw`` (``[n, slot bytes]``
    uint8, C-contiguous), as ``[n, *field shape]`` views."""
    flat = raw.reshape(-1)
    views = {}
    for f in layout.fields:
        one = np.ndarray(f.shape, f.dtype, buffer=flat, offset=layout.offsets[f.name])
        views[f.name] = np.ndarray((len(raw), *f.shape), f.dtype, buffer=flat,
                                   offset=layout.offsets[f.name],
                                   strides=(layout.nbytes, *one.strides))
    return views


class RawBatch:
    """``n`` slots as raw bytes in one ``[n, slot bytes]`` uint8 tensor on ``device`` (one
    transfer moves them all), and the batch's :data:`DEVICE_FIELDS` as tensors there."""

    def __init__(self, layout: SlotLayout, n: int, device: torch.device) -> None:
        self.n = n
        self.raw = torch.empty((n, layout.nbytes), dtype=torch.uint8, device=device)
        self.sources: dict[str, torch.Tensor] = {}  # [n, T, E, ...] / [n, E, ...] views
        self.tensors: dict[str, torch.Tensor] = {}
        for f in layout.fields:
            if f.name not in DEVICE_FIELDS:
                continue
            start = layout.offsets[f.name]
            src = self.raw[:, start:start + f.nbytes].view(torch_dtype(f.dtype))
            self.sources[f.name] = src.view(n, *f.shape)
            # One slot is already the batch: a view of the raw bytes, no copy. Several are
            # rearranged into buffers of their own (slots are not adjacent per field).
            self.tensors[f.name] = self.sources[f.name][0] if n == 1 else torch.empty(
                _batch_shape(f.name, f.shape, n), dtype=src.dtype, device=device)

    def rearrange(self) -> None:
        """``[n, T, E, ...]`` -> ``[T, n*E, ...]`` (``[n, E, ...]`` -> ``[n*E, ...]``), on
        the current stream."""
        if self.n == 1:
            return
        for name, dst in self.tensors.items():
            src = self.sources[name]
            if name in PER_ENV:
                dst.view(src.shape).copy_(src)
            else:
                dst.view(src.shape[1], self.n, *src.shape[2:]).copy_(src.transpose(0, 1))


class _CudaEntry:
    """One pool entry: pinned host bytes and a :class:`RawBatch` on the device for ``n``
    slots, and the events that say when each may be reused."""

    def __init__(self, layout: SlotLayout, device: torch.device, n: int) -> None:
        self.n = n
        self.pinned = torch.empty((n, layout.nbytes), dtype=torch.uint8, pin_memory=True)
        self.host = field_views(self.pinned.numpy(), layout)  # statistics read these
        self.device = RawBatch(layout, n, device)
        self.copied = torch.cuda.Event()  # pinned bytes transferred, device batch ready
        self.consumed = torch.cuda.Event()  # the compute stream is done with the batch
        self.issued = False  # ``copied`` was recorded at least once
        self.outstanding = False  # staged, not yet done()


class CudaStager(Stager):
    """Pinned, asynchronous, ``depth``-deep staging on a CUDA device (see the module
    documentation). ``profile=True`` records timing events of every copy and update for
    :meth:`overlap`."""

    asynchronous = True

    def __init__(self, layout: SlotLayout, device: torch.device, depth: int,
                 profile: bool = False) -> None:
        super().__init__(layout)
        self.device, self.depth = device, depth
        self.stream = torch.cuda.Stream(device)
        self._pools: dict[int, list[_CudaEntry]] = {}
        self._turn = 0
        self.profile = profile
        self.copy_spans: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self.compute_spans: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def _entry(self, n: int) -> _CudaEntry:
        pool = self._pools.get(n)
        if pool is None:
            pool = self._pools[n] = [_CudaEntry(self.layout, self.device, n)
                                     for _ in range(self.depth)]
            # The new buffers come from the compute stream's memory pool: the copy stream
            # writes them only after whatever that stream queued before (it may have used
            # the same memory last).
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
        entry = pool[self._turn % self.depth]
        self._turn += 1
        return entry

    def stage(self, rings: list[Ring], verify: bool = False) -> StagedBatch:
        entry = self._entry(len(rings))
        if entry.outstanding:
            raise RuntimeError(f"CudaStager: {self.depth} batches are staged and not done(); "
                               "done() one before staging another")
        if entry.issued:
            entry.copied.synchronize()  # its last transfer has left the pinned memory
        for b, ring in enumerate(rings):
            if verify:
                ring.verify()
            entry.pinned[b].copy_(torch.from_numpy(ring.read_bytes()))
            ring.release()  # its bytes are in pinned memory: the worker may refill it
        with torch.cuda.stream(self.stream):
            if entry.issued:
                self.stream.wait_event(entry.consumed)  # the last update read these buffers
            start = self._event()
            entry.device.raw.copy_(entry.pinned, non_blocking=True)
            entry.device.rearrange()
            entry.copied.record(self.stream)
            if start is not None:
                self.copy_spans.append((start, self._event()))
        entry.issued = entry.outstanding = True
        spans: list[torch.cuda.Event | None] = []

        def use() -> None:
            torch.cuda.current_stream(self.device).wait_event(entry.copied)
            spans.append(self._event())

        def done() -> None:
            entry.consumed.record(torch.cuda.current_stream(self.device))
            entry.outstanding = False
            if spans and spans[0] is not None:
                self.compute_spans.append((spans[0], self._event()))

        return StagedBatch(entry.device.tensors, entry.host, entry.n * self.slot_steps, use, done)

    def _event(self) -> torch.cuda.Event | None:
        """A timing event recorded on the current stream when profiling, else None."""
        if not self.profile:
            return None
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def overlap(self) -> dict[str, float]:
        """After a synchronize: total copy time, the part of it that ran while an update
        was computing, and their ratio (the share of copy time hidden behind compute)."""
        if not self.copy_spans or not self.compute_spans:
            return {}
        base = self.copy_spans[0][0]
        compute = [(base.elapsed_time(a), base.elapsed_time(b)) for a, b in self.compute_spans]
        total = hidden = 0.0
        for a, b in self.copy_spans:
            s, e = base.elapsed_time(a), base.elapsed_time(b)
            total += e - s
            hidden += sum(max(0.0, min(e, ce) - max(s, cs)) for cs, ce in compute)
        return {"copy_ms": total, "hidden_ms": hidden,
                "hidden_share": hidden / total if total > 0 else 0.0}

