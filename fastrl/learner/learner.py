"""The learner process: take batches from its feed, train on them, publish weights, report,
evaluate, save.

One loop for every data mode: next batch (the feed of the algorithm's data mode,
fastrl.learner.feeds) → update → publish weights → maybe report / evaluate / checkpoint.
:func:`run_learner` runs it in a process of its own, waiting whenever the feed has no batch
ready; the serial runtime (fastrl.runtime.serial) runs the same :class:`Learner`, letting its
workers fill slots instead of waiting.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import nn

from fastrl.algos.base import DataMode, annealed
from fastrl.checkpoint import parked_path, save_checkpoint
from fastrl.core.files import DiskFull
from fastrl.core.process import (
    become_child,
    keep_freed_memory,
    learner_torch,
    report_crash,
    rng_state,
    seed_everything,
    set_rng_state,
)
from fastrl.core.timing import StageTimer, timing_metrics
from fastrl.learner.evaluations import Evaluations
from fastrl.learner.feeds import AsyncFeed, DrainFeed, Feed, SyncFeed, TrainingFeed
from fastrl.learner.offpolicy import ReplayFeed
from fastrl.learner.report import ReportWindow
from fastrl.learner.writes import BackgroundWrite
from fastrl.memory.control import RunControl
from fastrl.memory.ring import WRITE_SEQ, Ring
from fastrl.memory.segments import attach
from fastrl.memory.wait import Stopped, wait_until
from fastrl.memory.weights import SharedWeights
from fastrl.models.encoders import channels_last_convs
from fastrl.models.policy import param_shapes
from fastrl.plan import RunPlan
from fastrl.resume import (
    checkpoint_writers,
    load_learner_state,
    manifest_info,
    parked_states,
    ring_contents,
    save_model,
)

PARK_WAIT_S = 20.0  # how long the final checkpoint waits for the workers to park
FLUSH_WAIT_S = 5.0  # how long a learner stopped by a full disk waits to say so


@dataclass
class LearnerSpec:
    """Everything the learner process needs, picklable; ``resume`` is the checkpoint folder
    to continue from; with ``evaluate_elsewhere`` periodic evaluations are the supervisor's
    (fastrl.runtime.periodic_evals), sent the weights, and the learner never stops for one."""

    plan: RunPlan
    ring_names: list[str]
    weights_name: str
    control_name: str
    run_dir: str
    parent_pid: int
    resume: str | None = None
    evaluate_elsewhere: bool = False


def run_learner(spec: LearnerSpec, metrics: Queue) -> None:
    """Process entry point: exit 0 when training ends or the run is stopped, 1 on error
    (EXIT_DISK_FULL on a full disk)."""
    become_child(spec.parent_pid)
    keep_freed_memory()
    plan = spec.plan
    try:
        shms = [attach(n) for n in spec.ring_names]
        weights_shm, control_shm = attach(spec.weights_name), attach(spec.control_name)
        rings = [Ring(s.buf, plan.layout, plan.cfg.infra.ring_slots) for s in shms]
        with learner_torch(plan.cfg.infra.learner_threads):
            weights, side = plan.weights_of(weights_shm.buf)
            Learner(spec, metrics, rings, weights, RunControl(control_shm.buf),
                    hooks=plan.learner_hooks(side)).run()
    except BaseException as e:
        code = report_crash(spec.run_dir, "learner", e)
        if isinstance(e, DiskFull):  # (its report may have found no room: the queue needs none)
            metrics.put(("disk_full", 0, {"error": str(e)}))
            metrics.close()
            flushed = threading.Thread(target=metrics.join_thread, daemon=True)
            flushed.start()
            flushed.join(FLUSH_WAIT_S)  # (a supervisor that no longer reads kills us anyway)
        os._exit(code)


def make_feed(plan: RunPlan, rings: list[Ring], weights: SharedWeights, update,
              policy: torch.nn.Module, device: torch.device, window: ReportWindow,
              timer: StageTimer) -> Feed | TrainingFeed:
    """The feed of the algorithm's data mode (a TrainingFeed for those that train)."""
    data = plan.cfg.algo.algorithm.data
    if data is DataMode.DRAIN:
        return DrainFeed(plan, rings, weights, policy)
    if data is DataMode.REPLAY:
        return ReplayFeed(plan, rings, weights, update, policy, device, window, timer)
    feed = SyncFeed if data is DataMode.SYNC else AsyncFeed
    return feed(plan, rings, weights, update, policy, device, window, timer)


class LearnerHook(Protocol):
    """What a feature runs beside the learner's publish and checkpoint, the one way a
    feature reaches the learner (docs/architecture.md, "Adding a feature")."""

    def published(self, policy: nn.Module, version: int) -> None:
        """The learner has just published ``policy`` as weights ``version`` (the first
        weights too, at start)."""

    def state(self) -> dict:
        """What the hook keeps in the learner's checkpoint state (its own keys)."""

    def restore(self, state: dict) -> None:
        """Continue from a checkpoint's learner ``state``."""


class Learner:
    """Owns the model and the algorithm's state; talks to workers only through shared
    memory (the rings, the weights, the run's control block).

    ``metrics`` takes ``(kind, step, payload)`` messages (a queue to the supervisor, or the
    serial runtime's dispatcher); ``timer`` keeps the learner's time per stage
    (fastrl.core.timing); ``hooks`` run beside every publish and checkpoint
    (:class:`LearnerHook`). A process drives it with :meth:`run`; the serial runtime with
    :meth:`start`, :meth:`training`, :meth:`step`, :meth:`wrap_up` and :meth:`finish`.
    """

    def __init__(self, spec: LearnerSpec, metrics: Queue, rings: list[Ring],
                 weights: SharedWeights, control: RunControl,
                 timer: StageTimer | None = None, hooks: Sequence[LearnerHook] = ()) -> None:
        plan = spec.plan
        cfg = plan.cfg
        self.spec, self.plan, self.cfg, self.metrics = spec, plan, cfg, metrics
        seed_everything(cfg.seed)
        self.device = torch.device(plan.device)
        self.policy = channels_last_convs(plan.policy()).to(self.device)
        self.algo = plan.make_update(self.policy, self.device, spec.run_dir) \
            if plan.trains else None
        self.rings, self.weights, self.control = rings, weights, control
        self.hooks = hooks
        self.timer = timer or StageTimer()
        # what the next metrics report will say
        self.window = ReportWindow(plan.episode_groups, plan.episode_stats)
        self.feed = make_feed(plan, rings, weights, self.algo, self.policy, self.device,
                              self.window, self.timer)
        self.evals = Evaluations(plan, self.policy, self.device, control, metrics, self.timer,
                                 spec.evaluate_elsewhere, self._should_stop)
        self.version = 0
        self.global_step = 0
        # (a run that trains nothing writes no checkpoint)
        self.next_checkpoint = cfg.log.checkpoint_every_steps if plan.trains else float("inf")
        self.stopped = False  # a stop request ended training early
        self._next_report = time.monotonic()
        self._writes = BackgroundWrite()  # periodic checkpoints, written beside training
        self._saved_banks: dict | None = None  # the weights a checkpoint's banks held
        # (the slots are taken in a fixed order: a periodic checkpoint can hold the workers'
        # states as they start their slots after it; not across Ray nodes)
        self._parks = plan.trains and plan.schedule is not None and \
            cfg.infra.runtime != "ray"
        if spec.resume:
            self._restore(Path(spec.resume))
        self._ask_workers_to_park(self.next_checkpoint)

    # --- the loop --------------------------------------------------------------------------
    def run(self) -> None:
        """Train to the end of the run, waiting whenever no batch is ready."""
        try:
            self.start()
            while self.training():
                if not self.step():
                    self._wait(self.feed.ready)
            self.wrap_up()
        except Stopped:
            self.stopped = True  # save what we have; the evaluation in progress is dropped
        finally:
            self.control.mark_done()
        self.finish()

    def start(self) -> None:
        """Publish the first weights (resumed: the banks the checkpoint kept, first; from a
        stop during an evaluation: run it)."""
        with self.timer.stage("sync_weights"):
            self.weights.restore_banks(self._saved_banks)
            self.feed.begin(self.version, self.global_step)
            for hook in self.hooks:
                hook.published(self.policy, self.version)
        self.control.record_step(self.global_step)
        if self.plan.trains and self.global_step >= self.evals.next_eval:
            self.evals.run(self.global_step)

    def training(self) -> bool:
        """Training goes on: ``algo.total_steps`` not reached (or the feed still owes
        updates), not solved, no stop request (slots may be ready for good, so a loop that
        never waits looks here; a batch staged ahead is trained on first)."""
        if self.control.stop_requested() and not self.feed.pending():
            self.stopped = True
            return False
        return (self.global_step < self.cfg.algo.total_steps or self.feed.owes_updates()) \
            and not self.evals.solved()

    def step(self) -> bool:
        """Train on the next batch, if the feed has one ready, and publish the new weights;
        then report, evaluate and checkpoint when due. False when no batch was ready."""
        batch = self.feed.poll(self.version, self.global_step)
        if batch is None:
            return False
        # (a batch without data moves the run on and trains nothing: only a TrainingFeed
        # hands over data)
        stats = None if batch.data is None else self.feed.train(batch, self._learning_rate())
        self.global_step += batch.steps
        if stats is not None:
            self.version += 1
            self.feed.overlap(self.version, self.global_step, self._may_stage_ahead())
            self._publish()
            self.window.add_update(stats)
        self.control.record_step(self.global_step)
        self.control.beat(time.monotonic_ns())
        self._on_schedule()
        return True

    def _learning_rate(self) -> float:
        """``algo.lr``, annealed linearly to 0 over ``algo.total_steps`` with
        ``algo.anneal_lr`` (the replay algorithms keep their own rates)."""
        algo = self.cfg.algo
        return annealed(algo.lr, algo.anneal_lr, self.global_step, algo.total_steps)

    def _on_schedule(self) -> None:
        """The report, evaluation and periodic checkpoint that are due."""
        self._checkpoint_written(self._writes.poll())
        if self.global_step >= self.cfg.algo.total_steps or \
                time.monotonic() >= self._next_report:
            self._report()
        if self.plan.trains and self.evals.due(self.global_step):
            self.evals.run(self.global_step)  # (the last one follows at the end)
        if self.next_checkpoint <= self.global_step < self.cfg.algo.total_steps:
            following = self.next_checkpoint
            while following <= self.global_step:
                following += self.cfg.log.checkpoint_every_steps
            with self.timer.stage("checkpoint"):  # (the final one follows at the end)
                self._checkpoint(final=False, following=following)
            self.next_checkpoint = following

    def _ask_workers_to_park(self, checkpoint_step: float) -> None:
        """Where periodic checkpoints hold the workers' states: ask every worker to leave
        its state as it starts its first slot after those the learner has taken when the
        periodic checkpoint due at ``checkpoint_step`` is written. The learner checks the
        schedule after every poll, which moves the run on by a whole number of polls, each
        of ``poll_steps`` env steps (fastrl.learner.feeds)."""
        if not self._parks:
            return
        poll_steps = self.plan.slot_steps if self.cfg.algo.algorithm.data is \
            DataMode.REPLAY else self.cfg.batch_size
        steps = -(-checkpoint_step // poll_steps) * poll_steps
        self.control.park_at(int(steps) // self.plan.slot_steps
                             if steps < self.cfg.algo.total_steps else None)

    def wrap_up(self) -> None:
        """Training is over: the last report, then the workers may park while the last
        weights are evaluated (or the solving ones taken back)."""
        if self.window.updates:  # solved between two reports
            self._report()
        self.control.mark_done()
        if self.plan.trains and not self.stopped:
            self.evals.finish(self.global_step)

    def finish(self) -> None:
        """The final checkpoint and ``model.pt`` (a run that trains), then the last
        messages."""
        if self.plan.trains:
            with self.timer.stage("checkpoint"):
                self._checkpoint(final=True)
                save_model(self.spec.run_dir, {"model": self.policy.state_dict(),
                                               "global_step": self.global_step})
        self._send_episodes()
        self.metrics.put(("done", self.global_step, {
            "eval": self.evals.last_eval, "timing": self.timer.seconds(),
            "stopped": self.stopped}))

    def _publish(self) -> None:
        with self.timer.stage("sync_weights"):
            self.feed.publish(self.version)
            for hook in self.hooks:
                hook.published(self.policy, self.version)
        self.control.record_step(self.global_step)

    def _should_stop(self) -> bool:
        self.control.beat(time.monotonic_ns())  # called from every wait: a waiting learner lives
        return self.control.stop_requested()

    def _wait(self, ready) -> None:
        """Wait, counted as ``waiting``, until ``ready()``; raises Stopped."""
        with self.timer.stage("waiting"):
            wait_until(ready, self._should_stop)

    def _may_stage_ahead(self) -> bool:
        """The next update is certain to train on a batch staged now: no evaluation,
        checkpoint or end comes first, and no stop was asked (one asked later waits for
        that update: :meth:`training`), since its slots are released once staged."""
        return not self.control.stop_requested() and self.global_step < min(
            self.cfg.algo.total_steps, self.evals.next_eval, self.next_checkpoint)

    # --- reports ---------------------------------------------------------------------------
    def _report(self) -> None:
        """One ``update`` metrics message for the updates since the last one (every
        ``log.metrics_every_s``): their mean losses (see fastrl.learner.report), the
        episodes that ended, policy lag, and the feed's own scalars (on-policy the last
        learning rate, ring occupancy and slots dropped; off-policy the replay's fill,
        sample age and samples per insert)."""
        stats = {**self.window.stats(), "policy_version": self.version} \
            if self.plan.trains else {}
        stats.update(self.feed.stats(), **timing_metrics("learner", self.timer.seconds()))
        self.metrics.put(("update", self.global_step, stats))
        self._send_episodes()
        self.window.reset()
        self._next_report = time.monotonic() + self.cfg.log.metrics_every_s

    def _send_episodes(self) -> None:
        """One ``episodes`` message with every episode that ended since the last one (each
        with its own return, length, step and time: fastrl.learner.report), if any did."""
        episodes = self.window.episodes()
        if episodes["step"]:
            self.metrics.put(("episodes", self.global_step, episodes))

    # --- checkpoints (what they hold: fastrl.resume) ---------------------------------------
    def _restore(self, folder: Path) -> None:
        state = load_learner_state(folder, self.device)
        self.policy.load_state_dict(state["model"])
        self.algo.load_state_dict(state["algo"])
        self.version, self.global_step = state["version"], state["global_step"]
        self.evals.restore(state, self.global_step)
        self.feed.restore(state, folder)
        self._saved_banks = state.get("weight_banks")
        for hook in self.hooks:
            hook.restore(state)
        # A config resumed with another interval continues on the new one.
        self.next_checkpoint = self.global_step + self.cfg.log.checkpoint_every_steps
        set_rng_state(state["rng"])

    def _state(self) -> dict:
        """What continues this learner (a copy: training goes on while a periodic
        checkpoint is written)."""
        return copy.deepcopy({
            "model": self.policy.state_dict(), "algo": self.algo.state_dict(),
            "rng": rng_state(), "version": self.version, "global_step": self.global_step,
            "next_checkpoint": self.next_checkpoint, **self.evals.state(),
            **self.feed.state(),
            **({"weight_banks": self.weights.banks_state()} if self.plan.schedule else {}),
            **{k: v for hook in self.hooks for k, v in hook.state().items()}})

    def _checkpoint(self, final: bool, following: float = float("inf")) -> None:
        """Write a checkpoint of everything that continues this run (fastrl.resume).

        A periodic one takes a copy of the state here and is written by a thread while
        training goes on (:class:`~fastrl.learner.writes.BackgroundWrite`). The final one
        is written here, after any periodic one in progress, and waits until the workers
        have parked, so that it also holds their states and the slots they published last:
        a resumed run then sees the same data.
        """
        self._checkpoint_written(self._writes.wait())
        if final:
            deadline = time.monotonic() + PARK_WAIT_S
            while not self.control.parked() and time.monotonic() < deadline:
                self.control.beat(time.monotonic_ns())
                time.sleep(0.01)
        state, rings, files = self._state(), ring_contents(self.rings), self.feed.files()
        params, step, version = param_shapes(self.policy), self.global_step, self.version

        def write() -> tuple[int, Path]:
            if final:
                parked = parked_states(self.spec.run_dir, self.rings)
            else:  # (the workers park as they start their next slot, a moment from now)
                parked = self._periodic_parks(rings) if self._parks else {}
                # (only now: a worker that had yet to start the slot must still see it)
                self._ask_workers_to_park(following)
            writers = checkpoint_writers(self.cfg, state, rings, parked, files)
            info = manifest_info(self.plan, params, version, final, self.rings, list(parked))
            folder = save_checkpoint(self.spec.run_dir, step, writers, info,
                                     self.cfg.log.keep_checkpoints)
            used = parked.values() if final else [
                parked_path(self.spec.run_dir, i, int(rings[f"seqs{i}"][0]))
                for i in range(len(self.rings))]  # (empty ones too)
            for path in used:
                path.unlink(missing_ok=True)
            return step, folder

        if not final:
            self._writes.start(write)
            return
        self._checkpoint_written(write())

    def _periodic_parks(self, rings: dict[str, np.ndarray]) -> dict[int, Path]:
        """The states the workers leave for a periodic checkpoint whose rings are ``rings``
        (fastrl.resume.ring_contents): each at the start of the slot its ring reads next,
        waited for until the worker has gone past that slot, or :data:`PARK_WAIT_S`. Each
        ring with a state keeps none of its unread slots: the worker collects them again
        from that state, the same data."""
        deadline = time.monotonic() + PARK_WAIT_S
        parked = {}
        for i, ring in enumerate(self.rings):
            seq = int(rings[f"seqs{i}"][0])
            path = parked_path(self.spec.run_dir, i, seq)
            while not path.exists() and ring.get(WRITE_SEQ) <= seq and \
                    time.monotonic() < deadline and not self.control.run_over():
                time.sleep(0.005)
            if path.exists() and path.stat().st_size:
                parked[i] = path
                rings[f"seqs{i}"][1] = seq
                rings[f"slots{i}"] = rings[f"slots{i}"][:0]
        return parked

    def _checkpoint_written(self, written: tuple[int, Path] | None) -> None:
        """Tell the supervisor about a checkpoint, ``(step, folder)``, now complete on disk
        (None: no news)."""
        if written is not None:
            step, path = written
            self.metrics.put(("checkpoint", step, {"path": str(path)}))
