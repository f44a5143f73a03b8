"""Feeds: how the learner gets its batches, one class per data mode.

A feed owns the slots between the rings and an update: which it waits for, which it takes
and in what order, how it stages them, when it releases them, how the algorithm's update is
called on them, and under which key the weights that follow are published. The learner's
loop is the same for every mode (fastrl.learner.learner): :meth:`Feed.poll` for the next
batch (None: wait until :meth:`Feed.ready`), :meth:`TrainingFeed.train` on it where it
carries data, :meth:`TrainingFeed.publish` the weights. :class:`Feed` is what every feed
does, :class:`TrainingFeed` what the feeds of the algorithms that train add; what not
every feed needs (a batch staged ahead, updates owed, scalars or files of its own) has its
default once in :class:`FeedDefaults`, and the feeds that need it override it. A feed never
calls the learner; it is handed the learner's weights version and env step where it needs
them.

With deterministic asynchrony (``infra.deterministic``: fastrl.plan.SlotSchedule) the feeds
take slots in their run-wide order only, so the same seed trains on the same data.

- :class:`SyncFeed` (``DataMode.SYNC``: ppo, a2c): one slot from every ring per update;
- :class:`AsyncFeed` (``ASYNC``: appo): ``batch_slots`` slots from whichever rings have them,
  in turns carried over between batches;
- both release, unread, the slots past the policy-lag bound (counted as dropped);
- :class:`~fastrl.learner.offpolicy.ReplayFeed` (``REPLAY``: dqn, sac): slots into a replay
  buffer under a samples-per-insert rate limiter, batches sampled from it;
- :class:`DrainFeed` (``DRAIN``: none): every slot released unread, nothing trained.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from fastrl.core.timing import StageTimer
from fastrl.learner.report import ReportWindow
from fastrl.learner.reward_scale import ReturnScale
from fastrl.learner.staging import StagedBatch, make_stager
from fastrl.memory.ring import Ring
from fastrl.memory.weights import SharedWeights
from fastrl.models.encoders import observe_observations
from fastrl.models.policy import flat_params
from fastrl.plan import RunPlan


@dataclass
class Batch:
    """What :meth:`Feed.poll` hands the learner: ``steps``, the env steps it moves the run
    forward, and ``data`` for :meth:`TrainingFeed.train` (None: nothing to train on)."""

    steps: int
    data: Any = None


class Feed(Protocol):
    """What every feed does, the learner's loop (see the module documentation)."""

    def begin(self, version: int, step: int) -> None:
        """Publish the learner's first weights (of ``version``, at env step ``step``);
        deterministic, under every key a worker may still need that is not published yet
        (a resumed run whose checkpoint kept none)."""

    def ready(self) -> bool:
        """:meth:`poll` would return a batch now (what the learner waits for)."""

    def poll(self, version: int, step: int) -> Batch | None:
        """The next batch, taken from what is ready now (the learner is at weights
        ``version`` and env step ``step``); None when nothing is."""

    def pending(self) -> bool:
        """A batch is staged ahead: it must be trained on, stop or not (its slots are
        released)."""

    def owes_updates(self) -> bool:
        """The data taken so far still owes updates (the replay ratio's): training goes on
        past ``algo.total_steps`` until they are done."""

    def stats(self) -> dict[str, float]:
        """The feed's scalars for the next metrics report."""


class TrainingFeed(Feed, Protocol):
    """What the feed of an algorithm that trains adds: the update on a batch whose
    ``data`` is not None, the weights that follow it, and the feed's part of a
    checkpoint."""

    def train(self, batch: Batch, lr: float) -> dict[str, torch.Tensor]:
        """Run the algorithm's update on ``batch`` and release it; its statistics."""

    def overlap(self, version: int, step: int, stage_next: bool) -> None:
        """While the update just issued runs on the device: stage the next batch when
        ``stage_next`` (the next update is sure to train on it), then wait for the update."""

    def publish(self, version: int) -> None:
        """Publish the weights of ``version``, just trained."""

    def state(self) -> dict:
        """What continues this feed, saved in the learner's checkpoint state."""

    def files(self) -> dict[str, Callable[[Path], None]]:
        """Files of the checkpoint of its own, by name: a writer each (data copied now)."""

    def restore(self, state: dict, folder: Path) -> None:
        """Continue from the learner's checkpoint ``state`` and checkpoint ``folder``."""


class FeedDefaults:
    """The answers of a feed that a need of the protocols does not concern: nothing staged
    ahead, no updates owed, no scalars, nothing to overlap, no files of its own. Each feed
    overrides only what it needs."""

    def pending(self) -> bool:
        """Nothing is staged ahead."""
        return False

    def owes_updates(self) -> bool:
        """No update is owed: an update trains on the data it takes."""
        return False

    def stats(self) -> dict[str, float]:
        """No scalars of its own."""
        return {}

    def overlap(self, version: int, step: int, stage_next: bool) -> None:
        """Nothing runs beside the update."""

    def files(self) -> dict[str, Callable[[Path], None]]:
        """No files of its own."""
        return {}


def weighted_rows(x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """The steps of ``x`` ``[T, N, ...]`` that count: all of them, or with a batch's
    ``weight`` ``[T, N]`` those of weight 1 (flattened)."""
    return x if weight is None else x[weight]


def drop_stale(rings: list[Ring], version: int, max_lag: int) -> int:
    """Release, unread, every slot at the head of a ring whose data lags ``version`` by more
    than ``max_lag`` policy versions; returns how many were dropped."""
    dropped = 0
    for ring in rings:
        while ring.has_ready_slot() and \
                version - int(ring.read_slot()["policy_version"].min()) > max_lag:
            ring.release()
            dropped += 1
    return dropped


def take_turns(ready: list[int], need: int, turn: int) -> tuple[list[int], int]:
    """APPO's pick of ``need`` slots from rings with ``ready[i]`` published slots: one per
    ring with slots left, round after round, starting at ring ``turn``; returns the ring
    indices (a ring once per slot) and the turn the next pick starts at. The turn carries
    over so that no worker's ring is left to fill up while the others are drained."""
    if sum(ready) < need:
        raise ValueError(f"{need} slots wanted, {sum(ready)} ready")
    left, picks = list(ready), []
    while len(picks) < need:
        if left[turn]:
            left[turn] -= 1
            picks.append(turn)
        turn = (turn + 1) % len(left)
    return picks, turn


def publish_weights(weights: SharedWeights, policy: torch.nn.Module, version: int,
                    keys: range | None = None) -> None:
    """Write ``policy``'s parameters as the weights of ``version``: under the version, or
    under each of ``keys`` that is not published yet."""
    if keys is None:
        weights.write(flat_params(policy), version)
        return
    flat = flat_params(policy)
    for key in keys:
        if not weights.has(key):
            weights.write(flat, version, key)


class OnPolicyFeed(FeedDefaults):
    """Ring slots staged on the learner's device as one time-major batch per update
    (fastrl.learner.staging); :class:`SyncFeed` and :class:`AsyncFeed` say which slots."""

    def __init__(self, plan: RunPlan, rings: list[Ring], weights: SharedWeights, update: Any,
                 policy: torch.nn.Module, device: torch.device, window: ReportWindow,
                 timer: StageTimer) -> None:
        cfg = plan.cfg
        self.cfg, self.rings, self.update, self.policy = cfg, rings, update, policy
        self.weights, self.schedule = weights, plan.schedule
        self.device, self.window, self.timer = device, window, timer
        self.stager = make_stager(plan.layout, device, cfg.infra.staging_depth)
        self.reward_scale = ReturnScale(cfg.total_envs, *plan.return_groups()) \
            if cfg.algo.normalize_reward else None
        if self.reward_scale is not None and hasattr(update, "bind_reward_scale"):
            update.bind_reward_scale(self.reward_scale)  # (PBT copies a member's statistics)
        self.dropped_slots = 0
        self._ahead: Batch | None = None  # the next batch, staged while an update ran
        self._occupancy = 0.0  # mean ring occupancy when the last batch was staged
        self._lr = cfg.algo.lr  # of the last update
        self._version = 0  # the learner's, as of the last poll
        self._step = 0  # the learner's env step, as of the last poll (the update's schedules)

    def ready(self) -> bool:
        """Enough slots are published for a batch (the lag bound is applied at poll)."""
        return self._ready(self._version)

    def _ready(self, version: int) -> bool:
        """Enough slots for the batch of update ``version`` are published."""
        raise NotImplementedError

    def _choose(self, version: int) -> list[Ring]:
        """The rings of the next batch's slots, once per slot taken."""
        raise NotImplementedError

    def begin(self, version: int, step: int) -> None:
        """Publish the first weights; deterministic, also under each older key a ring's
        next slot may need (back to ``banks`` - 1 versions before)."""
        if self.schedule is None:
            self.publish(version)
            return
        publish_weights(self.weights, self.policy, version,
                        range(max(0, version - self.schedule.banks + 1), version + 1))

    def publish(self, version: int) -> None:
        """Publish the weights of ``version`` (key: the version)."""
        publish_weights(self.weights, self.policy, version)

    def pending(self) -> bool:
        """A batch was staged while the last update ran (CUDA)."""
        return self._ahead is not None

    def poll(self, version: int, step: int) -> Batch | None:
        """The batch staged ahead, else the next one staged now: its slots within the
        policy-lag bound (older ones are dropped and counted), CRC-checked when
        ``infra.check_slots``."""
        self._version, self._step = version, step
        if self._ahead is not None:
            batch, self._ahead = self._ahead, None
            return batch
        while True:
            if not self._ready(version):
                return None
            dropped = drop_stale(self.rings, version, self.cfg.policy_lag_bound)
            if not dropped:
                break
            self.dropped_slots += dropped
        with self.timer.stage("update_dataset"):
            staged = self.stager.stage(self._choose(version), self.cfg.infra.check_slots)
            self.window.note_slots(staged.host, version, step)
            self._occupancy = sum(r.occupancy() for r in self.rings) / len(self.rings)
        return Batch(staged.steps, staged)

    def train(self, batch: Batch, lr: float) -> dict[str, torch.Tensor]:
        """The update on the staged batch (issued; on CUDA it may still run)."""
        staged: StagedBatch = batch.data
        self._lr = lr
        with self.timer.stage("train"):
            data = staged.use()
            # the statistics first: this batch is trained on with them
            if self.cfg.algo.normalize_obs:
                observe_observations(self.policy, weighted_rows(data["obs"],
                                                                data.get("weight")))
            if self.reward_scale:
                reward = data["reward"]
                data = {**data, "reward": reward * torch.as_tensor(
                    self._reward_factor(staged.host), dtype=reward.dtype, device=reward.device)}
            stats = self.update.update(data, lr, self._step)
            staged.done()
        return stats

    def _reward_factor(self, host: dict[str, np.ndarray]) -> float | np.ndarray:
        """Fold a batch's rewards into the return statistics; the factor to scale them by
        (one per column where a slot's rows have groups of their own:
        :meth:`~fastrl.plan.RunPlan.return_groups`)."""
        return self.reward_scale.update(host["reward"], host["terminated"] | host["truncated"],
                                        host["env_id"], self.cfg.infra.envs_per_worker,
                                        host.get("weight"))

    def overlap(self, version: int, step: int, stage_next: bool) -> None:
        """On CUDA: stage the next batch while the update runs, when its slots are ready
        already and ``stage_next`` (its slots are released once staged: a batch staged
        before an evaluation, a checkpoint, the end or a stop would be in no checkpoint);
        then wait for the update."""
        if self.device.type != "cuda":
            return
        if stage_next and self.stager.asynchronous:
            self._ahead = self.poll(version, step)
        with self.timer.stage("train"):  # (until here only issued)
            torch.cuda.current_stream(self.device).synchronize()

    def stats(self) -> dict[str, float]:
        """The last learning rate, ring occupancy at the last batch, slots dropped past the
        lag bound so far."""
        return {"lr": self._lr, "ring_occupancy": self._occupancy,
                "dropped_stale_slots": self.dropped_slots}

    def state(self) -> dict:
        """Slots dropped so far, and the return scale's statistics."""
        return {"dropped_slots": self.dropped_slots,
                **({"reward_scale": self.reward_scale.state_dict()}
                   if self.reward_scale else {})}

    def restore(self, state: dict, folder: Path) -> None:
        """Continue the drop count and the return scale."""
        self.dropped_slots = state.get("dropped_slots", 0)
        if self.reward_scale and "reward_scale" in state:
            self.reward_scale.load_state_dict(state["reward_scale"])


class SyncFeed(OnPolicyFeed):
    """``DataMode.SYNC``: an update trains on one slot from every ring (in ring order: the
    same slots whether or not the run is deterministic)."""

    def _ready(self, version: int) -> bool:
        """Every worker has published a slot."""
        return all(r.has_ready_slot() for r in self.rings)

    def _choose(self, version: int) -> list[Ring]:
        return self.rings


class AsyncFeed(OnPolicyFeed):
    """``DataMode.ASYNC``: an update trains on ``batch_slots`` slots from whichever rings
    have them, taken in turns (:func:`take_turns`); deterministic, the next
    ``batch_slots`` slots of the run-wide order (fastrl.plan.SlotSchedule), however long
    one of them takes."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._turn = 0  # the ring whose slot is taken first next time

    def _ready(self, version: int) -> bool:
        """``batch_slots`` slots are published in all; deterministic, those of update
        ``version``."""
        if self.schedule:
            wanted = np.bincount(self._ordered(version), minlength=len(self.rings))
            return all(r.occupancy() >= n for r, n in zip(self.rings, wanted))
        return sum(r.occupancy() for r in self.rings) >= self.cfg.batch_slots

    def _ordered(self, version: int) -> np.ndarray:
        """The rings of update ``version``'s slots in the run-wide order."""
        first = version * self.schedule.batch_slots
        return np.arange(first, first + self.schedule.batch_slots) % len(self.rings)

    def _choose(self, version: int) -> list[Ring]:
        if self.schedule:
            return [self.rings[i] for i in self._ordered(version)]
        picks, self._turn = take_turns([r.occupancy() for r in self.rings],
                                       self.cfg.batch_slots, self._turn)
        return [self.rings[i] for i in picks]


class DrainFeed(FeedDefaults):
    """``DataMode.DRAIN`` (``algo.name=none``): every slot is released as soon as it is
    published and its steps counted; nothing is trained, copied or saved (collection
    throughput). Its batches carry no data: the learner trains on none of them."""

    def __init__(self, plan: RunPlan, rings: list[Ring], weights: SharedWeights,
                 policy: torch.nn.Module) -> None:
        self.rings, self.weights, self.policy = rings, weights, policy
        self.slot_steps = plan.slot_steps

    def begin(self, version: int, step: int) -> None:
        """The weights the workers act with for good."""
        publish_weights(self.weights, self.policy, version)

    def ready(self) -> bool:
        """Some ring has a published slot."""
        return any(r.has_ready_slot() for r in self.rings)

    def poll(self, version: int, step: int) -> Batch | None:
        """Release every published slot; their steps, or None when there were none."""
        steps = 0
        for ring in self.rings:
            while ring.has_ready_slot():
                ring.release()
                steps += self.slot_steps
        return Batch(steps) if steps else None
