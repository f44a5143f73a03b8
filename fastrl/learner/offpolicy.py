"""The learner's off-policy data path: ring slots -> replay buffer -> training batches, paced
by a samples-per-insert rate limiter.

Workers never wait for new weights in off-policy runs; the only brake on collection is the
ring: a slot the learner has not ingested stays in its ring, and a worker whose ring is full
waits. The learner ingests a slot only while collection is at most ``max_ahead_steps`` env
steps ahead of the configured update-to-data ratio, and trains only while training is at
most that far ahead of it (Reverb's ``SampleToInsertRatio`` with an error buffer). So it
neither trains on a starved buffer nor lets collection run arbitrarily far ahead.

Deterministic (``infra.deterministic``: fastrl.plan.SlotSchedule), the learner decides on
counts alone: it trains while training is behind the ratio by a batch or more, else takes
the next slot of the run-wide order while the limiter admits one (waiting for it if need
be), else trains within the limiter's margin; as it takes slot ``g`` it publishes the
weights for slot ``g + delay``, the one that will fill the room ``g`` leaves. Either way,
once ``algo.total_steps`` are in, the updates the data still owes are done.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from fastrl.algos.base import ReplayUpdate
from fastrl.config import MainConfig
from fastrl.core.timing import StageTimer
from fastrl.learner.feeds import Batch, FeedDefaults, publish_weights
from fastrl.learner.report import ReportWindow
from fastrl.memory.layout import storage_of
from fastrl.memory.ring import Ring
from fastrl.memory.weights import SharedWeights
from fastrl.models.policy import flat_params
from fastrl.plan import RunPlan
from fastrl.replay import PrioritizedReplayBuffer, ReplayBuffer, linear_schedule
from fastrl.resume import savez


class RateLimiter:
    """Keeps ``sampled`` within ``error`` samples of ``ratio * (inserted - min_inserts)``.

    ``error`` is raised to at least ``(batch + ratio * slot) / 2``: with less, a state exists
    where neither a batch may be sampled nor a slot inserted, and the run would stall.
    """

    def __init__(self, ratio: float, min_inserts: int, error: float, batch: int,
                 slot: int) -> None:
        self.ratio, self.min_inserts = ratio, min_inserts
        self.error = max(error, (batch + ratio * slot) / 2)

    def _lead(self, inserted: int, sampled: int) -> float:
        """Samples owed to the inserts so far (positive: training is behind)."""
        return self.ratio * (inserted - self.min_inserts) - sampled

    def can_sample(self, inserted: int, sampled: int, n: int) -> bool:
        """May ``n`` more transitions be sampled?"""
        return inserted >= self.min_inserts and self._lead(inserted, sampled) + self.error >= n

    def owes(self, inserted: int, sampled: int, n: int) -> bool:
        """Is training at least ``n`` samples behind the ratio?"""
        return inserted >= self.min_inserts and self._lead(inserted, sampled) >= n

    def can_insert(self, inserted: int, sampled: int, n: int) -> bool:
        """May ``n`` more transitions be inserted? Always before ``min_inserts`` (even past
        it, so that training can start), then while collection is at most ``error`` ahead."""
        return inserted < self.min_inserts or self._lead(inserted + n, sampled) <= self.error

    def rebase(self, inserted: int, sampled: int) -> int:
        """``sampled`` moved into this limiter's window: a resumed run whose ratio or start
        changed would otherwise wait (or train) for as long as the old counts are off."""
        owed = self.ratio * max(0, inserted - self.min_inserts)
        return int(min(max(sampled, owed - self.error), owed + self.error))


def make_buffer(cfg: MainConfig, obs_space, act_space) -> ReplayBuffer:
    """The replay buffer ``cfg.algo.replay`` describes, sized from the env spaces."""
    rc = cfg.algo.replay
    obs_shape, obs_dtype = storage_of(obs_space, "observation")
    act_shape, act_dtype = storage_of(act_space, "action")
    args = (rc.capacity, obs_shape, obs_dtype, act_shape, act_dtype, cfg.total_envs,
            rc.n_step, cfg.algo.gamma)
    if rc.prioritized:
        return PrioritizedReplayBuffer(*args, alpha=rc.alpha, eps=rc.eps)
    return ReplayBuffer(*args)


PUBLISH_EVERY = 64  # free-running: updates between two publications of the weights, at most


class ReplayFeed(FeedDefaults):
    """``DataMode.REPLAY``'s feed (fastrl.learner.feeds): moves slots from the rings into
    the replay buffer and draws training batches, as the rate limiter allows."""

    def __init__(self, plan: RunPlan, rings: list[Ring], weights: SharedWeights,
                 update: ReplayUpdate, policy: torch.nn.Module, device: torch.device,
                 window: ReportWindow, timer: StageTimer) -> None:
        cfg = plan.cfg
        rc = cfg.algo.replay
        self.cfg, self.rings, self.update, self.device = cfg, rings, update, device
        self.weights, self.policy, self.schedule = weights, policy, plan.schedule
        self.window, self.timer = window, timer
        self.buffer = make_buffer(cfg, plan.obs_space, plan.act_space)
        self.slot_steps = plan.slot_steps
        self.limiter = RateLimiter(rc.batch_size * rc.updates_per_step,
                                   max(rc.learning_starts, rc.batch_size),
                                   rc.batch_size * rc.updates_per_step * rc.max_ahead_steps,
                                   rc.batch_size, self.slot_steps)
        self.beta = linear_schedule(rc.beta, 1.0, cfg.algo.total_steps)
        self.rng = np.random.default_rng(cfg.seed)
        self.inserted = 0  # env steps ingested (the limiter's inserts; the global step)
        self.sampled = 0  # transitions drawn for training
        self._batch: dict[str, np.ndarray] | None = None
        self._turn = 0  # the ring whose slot is ingested next
        self._unpublished = 0  # updates since the weights were last published

    def poll(self, version: int, step: int) -> Batch | None:
        """Ingest the slots the limiter admits, then sample a batch if it admits one; None
        when neither was possible. Deterministic: a batch if the limiter admits one, else
        the next slot in order if it is published."""
        with self.timer.stage("update_dataset"):
            if self.schedule:
                return self._poll_in_order(version)
            ingested = self.ingest(version)
            data = self.sample() if self.can_train() else None
        return Batch(ingested, data) if ingested or data is not None else None

    def _poll_in_order(self, version: int) -> Batch | None:
        """Deterministic: a batch while training owes one; else the next slot in order
        while the limiter admits it (None until it is published); else a batch within the
        limiter's margin."""
        if self._owes_batch():
            return Batch(0, self.sample())
        if self._may_insert():
            ring = self._next_ring()
            if not ring.has_ready_slot():
                return None
            self._take(ring, version)
            return Batch(self.slot_steps)
        return Batch(0, self.sample()) if self.can_train() else None

    def ready(self) -> bool:
        """A slot may be ingested or a batch sampled now (deterministic: what
        :meth:`poll` would do next can be done)."""
        if self.schedule is None:
            return self.can_ingest() or self.can_train()
        if self._owes_batch():
            return True
        return self._next_ring().has_ready_slot() if self._may_insert() else self.can_train()

    def _owes_batch(self) -> bool:
        """Training is at least a batch behind the ratio (and the buffer has transitions)."""
        return self.buffer.size > 0 and self.limiter.owes(
            self.inserted, self.sampled, self.cfg.algo.replay.batch_size)

    def _may_insert(self) -> bool:
        """Counts alone admit one more slot: ``algo.total_steps`` not reached, and the
        limiter lets collection that far ahead."""
        return self.inserted < self.cfg.algo.total_steps and \
            self.limiter.can_insert(self.inserted, self.sampled, self.slot_steps)

    def _next_ring(self) -> Ring:
        """The ring of the next slot in the run-wide order (deterministic)."""
        return self.rings[self.inserted // self.slot_steps % len(self.rings)]

    def begin(self, version: int, step: int) -> None:
        """Publish the first weights; deterministic, for each slot the rings may be filled
        with before the learner takes one (those a checkpoint did not keep)."""
        if self.schedule is None:
            publish_weights(self.weights, self.policy, version)
            return
        first = self.inserted // self.slot_steps
        publish_weights(self.weights, self.policy, version,
                        range(first, first + self.schedule.delay))

    def publish(self, version: int) -> None:
        """Publish the weights of ``version`` every PUBLISH_EVERY updates, and whenever the
        limiter stops training (deterministic: never here; the weights for each slot are
        published as the learner takes the slot whose room it fills)."""
        if self.schedule:
            return
        self._unpublished += 1
        if self._unpublished >= PUBLISH_EVERY or not self.can_train():
            publish_weights(self.weights, self.policy, version)
            self._unpublished = 0

    def owes_updates(self) -> bool:
        """``algo.total_steps`` are in and training is still a batch or more behind."""
        return self.inserted >= self.cfg.algo.total_steps and self._owes_batch()

    def train(self, batch: Batch, lr: float) -> dict[str, torch.Tensor]:
        """One gradient step on the sampled batch, then its new priorities (the algorithm
        keeps its own learning rates)."""
        with self.timer.stage("train"):
            stats, td_abs = self.update.update(batch.data)
        with self.timer.stage("update_dataset"):
            self.update_priorities(td_abs)
        return stats

    def ingest(self, version: int) -> int:
        """Copy ready slots into the buffer, and release them, while the limiter admits them
        and ``algo.total_steps`` is not reached; returns the env steps ingested. The report
        window sees each slot first (its episodes; its lag behind weights ``version``).

        The rings take turns, one slot each, and the turn carries over to the next call:
        draining the first ring while the limiter admits would starve the others (their
        workers would wait on full rings for good).
        """
        steps, idle, n = 0, 0, len(self.rings)
        while idle < n:
            ring = self.rings[self._turn]
            self._turn = (self._turn + 1) % n
            if not self._admits(ring):
                idle += 1
                continue
            idle = 0
            self._take(ring, version)
            steps += self.slot_steps
        return steps

    def _take(self, ring: Ring, version: int) -> None:
        """Copy ``ring``'s next slot into the buffer and release it (deterministic: once the
        weights for the slot that will take its room are published)."""
        slot = ring.read_slot()
        if self.cfg.infra.check_slots:
            ring.verify()
        self.buffer.add_slot(slot)
        self.window.note_slots(slot, version, self.inserted)
        if self.schedule:
            key = self.inserted // self.slot_steps + self.schedule.delay
            self.weights.write(flat_params(self.policy), version, key)
        ring.release()
        self.inserted += self.slot_steps

    def can_train(self) -> bool:
        """True when the limiter admits one more batch (and n-step windows have completed
        some transition: the buffer lags the steps ingested by up to n - 1 per env)."""
        return self.buffer.size > 0 and self.limiter.can_sample(
            self.inserted, self.sampled, self.cfg.algo.replay.batch_size)

    def _admits(self, ring: Ring) -> bool:
        """True when ``ring`` has a slot to ingest now: published, admitted by the limiter,
        and ``algo.total_steps`` not yet reached."""
        return self.inserted < self.cfg.algo.total_steps and ring.has_ready_slot() and \
            self.limiter.can_insert(self.inserted, self.sampled, self.slot_steps)

    def can_ingest(self) -> bool:
        """True when some ring has a slot to ingest now."""
        return any(self._admits(r) for r in self.rings)

    def state(self) -> dict:
        """The counters and sampling RNG (under ``replay``)."""
        return {"replay": {"inserted": self.inserted, "sampled": self.sampled,
                           "rng": self.rng.bit_generator.state}}

    def files(self) -> dict[str, Callable[[Path], None]]:
        """``replay.npz``: the buffer's arrays, copied now."""
        replay = self.buffer.state_dict()  # (copies)
        return {"replay.npz": lambda p: savez(p, replay)}

    def restore(self, state: dict, folder: Path) -> None:
        """Continue from a checkpoint: the buffer's arrays and the counters and sampling
        RNG that :meth:`state` saved."""
        with np.load(folder / "replay.npz") as replay:
            self.buffer.load_state_dict(dict(replay))
        counters = state["replay"]
        self.inserted = counters["inserted"]
        self.sampled = self.limiter.rebase(self.inserted, counters["sampled"])
        self.rng.bit_generator.state = counters["rng"]

    def sample(self) -> dict[str, torch.Tensor]:
        """One training batch on the learner's device (valid until the next sample)."""
        rc = self.cfg.algo.replay
        if isinstance(self.buffer, PrioritizedReplayBuffer):
            batch = self.buffer.sample(rc.batch_size, self.rng, beta=self.beta(self.inserted))
        else:
            batch = self.buffer.sample(rc.batch_size, self.rng)
        self.sampled += rc.batch_size
        self._batch = batch
        return {k: torch.from_numpy(batch[k]).to(self.device)
                for k in ("obs", "action", "reward", "next_obs", "done", "discount", "weights")}

    def update_priorities(self, td_abs: torch.Tensor) -> None:
        """New priorities for the last batch (prioritized replay only)."""
        if isinstance(self.buffer, PrioritizedReplayBuffer):
            batch = self._batch
            priorities = self.buffer.td_priorities(td_abs.cpu().numpy())
            self.buffer.update_priorities(batch["indices"], priorities, batch["stamps"])

    def stats(self) -> dict[str, float]:
        """``replay/*`` scalars: fill, mean age of the last batch (transitions inserted since
        they were), samples per insert so far (after learning_starts)."""
        buf = self.buffer
        out = {"replay/fill": buf.size / buf.capacity,
               "replay/samples_per_insert": self.sampled /
               max(1, self.inserted - self.limiter.min_inserts)}
        if self._batch is not None:
            out["replay/sample_age"] = float(buf.inserted - self._batch["stamps"].mean())
        return out
