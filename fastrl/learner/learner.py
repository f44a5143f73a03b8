"""The learner process: take ring slots, train on them, publish weights, evaluate, save."""

from __future__ import annotations

import copy
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.queues import Queue
from pathlib import Path

import numpy as np
import torch

from fastrl.algos.base import DataMode
from fastrl.checkpoint import parked_path, save_checkpoint
from fastrl.config import config_hash, to_yaml
from fastrl.core.files import DiskFull, telling_disk_full
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
from fastrl.eval.harness import SeedSuite, evaluate
from fastrl.learner.offpolicy import ReplayFeed, replay_shape
from fastrl.learner.report import ReportWindow
from fastrl.learner.reward_scale import ReturnScale
from fastrl.learner.staging import StagedBatch, make_stager
from fastrl.learner.writes import BackgroundWrite
from fastrl.memory.ring import INCARNATION, WRITE_SEQ, Ring
from fastrl.memory.segments import attach
from fastrl.memory.wait import Stopped, wait_until
from fastrl.memory.weights import SharedWeights
from fastrl.models.encoders import observe_observations
from fastrl.models.policy import flat_params, load_flat_params, param_shapes
from fastrl.plan import RunPlan

MAX_UPDATES_PER_ROUND = 64  # off-policy: updates between looks at the rings and schedule
PARK_WAIT_S = 20.0  # how long the final checkpoint waits for the workers to park
FLUSH_WAIT_S = 5.0  # how long a learner stopped by a full disk waits to say so
# Weights sent for evaluation that are kept, the newest (besides those being evaluated): the
# supervisor evaluates one at a time and keeps only the newest request waiting.
KEEP_SENT_WEIGHTS = 2


@dataclass
class LearnerSpec:
    """Everything the learner process needs, picklable; ``resume`` is the checkpoint folder
    to continue from; with ``evaluate_elsewhere`` periodic evaluations are the supervisor's
    (fastrl.runtime.periodic_evals), sent the weights, and the learner never stops for one."""

    plan: RunPlan
    ring_names: list[str]
    weights_name: str
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
        shms = [attach(n) for n in spec.ring_names] + [attach(spec.weights_name)]
        rings = [Ring(s.buf, plan.layout, plan.cfg.infra.ring_slots) for s in shms[:-1]]
        with learner_torch(plan.cfg.infra.learner_threads):
            Learner(spec, metrics, rings, SharedWeights(shms[-1].buf, plan.num_params)).run()
    except BaseException as e:
        code = report_crash(spec.run_dir, "learner", e)
        if isinstance(e, DiskFull):  # (its report may have found no room: the queue needs none)
            metrics.put(("disk_full", 0, {"error": str(e)}))
            metrics.close()
            flushed = threading.Thread(target=metrics.join_thread, daemon=True)
            flushed.start()
            flushed.join(FLUSH_WAIT_S)  # (a supervisor that no longer reads kills us anyway)
        os._exit(code)


def ring_shape(cfg, slot_bytes: int) -> dict:
    """What saved slots and parked worker states depend on: a resumed run restores them only
    when all of it is unchanged (a lower lag bound would drop restored slots and put the
    cursors out of step with the weights version; unstamped slots would fail a CRC check)."""
    infra = cfg.infra
    return {"num_workers": infra.num_workers, "envs_per_worker": infra.envs_per_worker,
            "rollout_len": infra.rollout_len, "ring_slots": infra.ring_slots,
            "max_policy_lag": cfg.policy_lag_bound, "check_slots": infra.check_slots,
            "slot_bytes": slot_bytes, "env_kwargs": dict(cfg.env.kwargs)}


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


def _savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with path.open("wb") as f:
        np.savez(f, **arrays)


def _torch_save(obj: object, path: Path) -> None:
    # A file of our own, closed however the write ends: given a path, torch.save's writer
    # holds the file open until it is collected, and the failed write's traceback (kept
    # to be raised in the learner's thread) keeps it; a full disk then stays full after
    # the half-written checkpoint is removed.
    with path.open("wb") as f:
        torch.save(obj, f)


class Learner:
    """Owns the model and the algorithm's state; talks to workers only through shared
    memory. On-policy it trains on B slots per update, staged on its device (see
    fastrl.learner.staging): PPO one slot from every worker, APPO ``algo.appo.batch_slots``
    from whichever workers have one ready. Off-policy (DQN, SAC) it feeds slots into a
    replay buffer and trains on samples of it.

    ``metrics`` takes ``(kind, step, payload)`` messages (a queue to the supervisor, or the
    serial runtime's dispatcher). ``produce``, in the serial runtime, runs the workers for
    a slot each: every wait of the learner calls it, so waiting for data makes the data.
    ``timer`` keeps the learner's time per stage (fastrl.core.timing).
    """

    def __init__(self, spec: LearnerSpec, metrics: Queue, rings: list[Ring],
                 weights: SharedWeights, produce: Callable[[], None] | None = None,
                 timer: StageTimer | None = None) -> None:
        plan = spec.plan
        cfg = plan.cfg
        self.spec, self.cfg, self.metrics = spec, cfg, metrics
        seed_everything(cfg.seed)
        self.device = torch.device(plan.device)
        self.policy = plan.policy().to(self.device)
        algorithm = cfg.algo.algorithm
        self.data = algorithm.data
        self.algo = algorithm.make_update(cfg.algo, self.policy, plan.obs_space,
                                          plan.act_space, self.device) if plan.trains else None
        self.rings, self.weights = rings, weights
        self.produce = produce
        self.timer = timer or StageTimer()
        self.feed = ReplayFeed(cfg, plan.obs_space, plan.act_space, self.rings, self.device,
                               cfg.seed) if self.data is DataMode.REPLAY else None
        self.stager = make_stager(plan.layout, self.device, cfg.infra.staging_depth) \
            if self.data.on_policy else None
        self._staged: StagedBatch | None = None  # the next batch, staged ahead
        self.reward_scale = ReturnScale(cfg.total_envs, cfg.algo.gamma) \
            if cfg.algo.normalize_reward else None
        self._turn = 0  # appo: the ring whose slot is taken first next time
        self.version = 0
        self.global_step = 0
        self.dropped_slots = 0
        self.next_eval = cfg.log.eval_every_steps
        self.next_checkpoint = cfg.log.checkpoint_every_steps
        self.stopped = False  # a stop request ended training early
        self.last_eval: dict[str, float] | None = None
        self.eval_step = -1
        self.window = ReportWindow()  # what the next metrics report will say
        self._last: dict[str, float] = {}  # on-policy: lr and ring occupancy of the last update
        self._next_report = time.monotonic()
        self._writes = BackgroundWrite()  # periodic checkpoints, written beside training
        self._sent: dict[int, np.ndarray] = {}  # weights sent for evaluation, by env step
        if spec.resume:
            self._restore(Path(spec.resume) / "learner.pt")

    # --- checkpoints -----------------------------------------------------------------------
    SCHEDULE = ("version", "global_step", "dropped_slots", "next_eval", "next_checkpoint",
                "last_eval", "eval_step")

    def _restore(self, path: Path) -> None:
        state = torch.load(path, map_location=self.device, weights_only=True)
        self.policy.load_state_dict(state["model"])
        # (checkpoints before the off-policy algorithms kept PPO's optimizer at the top)
        self.algo.load_state_dict(state.get("algo") or {"optimizer": state["optimizer"]})
        for key in self.SCHEDULE:
            setattr(self, key, state[key])
        if self.reward_scale and "reward_scale" in state:
            self.reward_scale.load_state_dict(state["reward_scale"])
        if self.feed:
            with np.load(path.parent / "replay.npz") as replay:
                self.feed.restore(state["replay"], dict(replay))
        # A config resumed with another interval continues on the new one.
        log = self.cfg.log
        self.next_eval = min(self.next_eval, self.global_step + log.eval_every_steps)
        self.next_checkpoint = self.global_step + log.checkpoint_every_steps
        set_rng_state(state["rng"])

    def _parked_states(self) -> dict[int, Path]:
        """Workers that parked right after the last slot their ring holds."""
        found = {}
        for i, ring in enumerate(self.rings):
            path = parked_path(self.spec.run_dir, i, ring.get(WRITE_SEQ))
            if path.exists():
                found[i] = path
        return found

    def _checkpoint(self, final: bool) -> None:
        """Write a checkpoint of everything that continues this run (see fastrl.checkpoint).

        A periodic one takes a copy of the state here and is written by a thread while
        training goes on (:class:`~fastrl.learner.writes.BackgroundWrite`). The final one
        is written here, after any periodic one in progress, and waits until the workers
        have parked, so that it also holds their states and the slots they published last:
        a resumed run then sees the same data.
        """
        self._checkpoint_written(self._writes.wait())
        if final:
            deadline = time.monotonic() + PARK_WAIT_S
            while not self.weights.parked() and time.monotonic() < deadline:
                self.weights.beat(time.monotonic_ns())
                if self.produce:
                    self.produce()  # (serial: parks the workers)
                else:
                    time.sleep(0.01)
        parked = self._parked_states() if final else {}
        pending = [r.pending() for r in self.rings]
        # A copy: training goes on while a periodic checkpoint is written.
        state = copy.deepcopy({
            "model": self.policy.state_dict(), "algo": self.algo.state_dict(),
            "rng": rng_state(),
            **({"reward_scale": self.reward_scale.state_dict()} if self.reward_scale else {}),
            **{key: getattr(self, key) for key in self.SCHEDULE}})

        rings = {}
        for i, (read_seq, write_seq, data) in enumerate(pending):
            rings[f"seqs{i}"] = np.array([read_seq, write_seq], np.int64)
            rings[f"slots{i}"] = data
        writers = {"learner.pt": lambda p: _torch_save(state, p),
                   "rings.npz": lambda p: _savez(p, rings),
                   "config.yaml": lambda p: p.write_text(to_yaml(self.cfg))}
        for i, src in parked.items():
            writers[f"worker-{i}.pkl"] = lambda p, src=src: shutil.copyfile(src, p)
        if self.feed:
            state["replay"] = copy.deepcopy(self.feed.state())
            replay = self.feed.buffer.state_dict()  # (copies)
            writers["replay.npz"] = lambda p: _savez(p, replay)
        plan = self.spec.plan
        info = {
            "config_hash": config_hash(self.cfg), "env_id": self.cfg.env.id,
            "observation_space": repr(plan.obs_space), "action_space": repr(plan.act_space),
            "updates": self.version, "final": final, "algo": self.cfg.algo.name,
            "replay": replay_shape(self.cfg),
            "param_shapes": param_shapes(self.policy),
            "rings": ring_shape(self.cfg, plan.layout.nbytes),
            "worker_states": sorted(parked),
            "worker_incarnations": [r.get(INCARNATION) for r in self.rings],
        }
        def write() -> tuple[int, Path]:
            return step, save_checkpoint(self.spec.run_dir, step, writers, info,
                                         self.cfg.log.keep_checkpoints)

        step = self.global_step
        if not final:
            self._writes.start(write)
            return
        self._checkpoint_written(write())
        for src in parked.values():
            src.unlink()

    def _checkpoint_written(self, written: tuple[int, Path] | None) -> None:
        """Tell the supervisor about a checkpoint, ``(step, folder)``, now complete on disk
        (None: no news)."""
        if written is not None:
            step, path = written
            self.metrics.put(("checkpoint", step, {"path": str(path)}))

    # --- training --------------------------------------------------------------------------
    def _publish(self) -> None:
        with self.timer.stage("sync_weights"):
            self.weights.write(flat_params(self.policy), self.version)
            self.weights.record_step(self.global_step)

    def _should_stop(self) -> bool:
        self.weights.beat(time.monotonic_ns())  # called from every wait: a waiting learner lives
        if self.produce:
            self.produce()
        return self.weights.stop_requested()

    def _wait(self, ready: Callable[[], bool]) -> None:
        """Wait, counted as ``waiting``, until ``ready()``; raises Stopped."""
        with self.timer.stage("waiting"):
            wait_until(ready, self._should_stop)

    def _evaluate(self) -> None:
        """The periodic evaluation that is due: sent to the supervisor with a copy of the
        weights (``evaluate_elsewhere``), else run here."""
        log = self.cfg.log
        if self.spec.evaluate_elsewhere:
            params = flat_params(self.policy)
            self._sent[self.global_step] = params
            judged = self.weights.eval_step()
            for step in sorted(self._sent)[:-KEEP_SENT_WEIGHTS]:
                if step != judged:
                    del self._sent[step]
            self.metrics.put(("evaluate", self.global_step, {"params": params}))
        else:
            self._evaluate_here()
        while self.next_eval <= self.global_step:  # advanced only once it is done or sent
            self.next_eval += log.eval_every_steps

    def _evaluate_here(self) -> None:
        suite = SeedSuite.of(self.cfg.log)
        self.policy.eval()
        with self.timer.stage("evaluate"):
            result = evaluate(self.policy, self.spec.plan.env, suite.seeds, self.device,
                              suite.max_steps, self._should_stop,
                              episodes_per_seed=suite.episodes_per_seed)
        self.policy.train()
        self.last_eval, self.eval_step = result, self.global_step
        self.metrics.put(("eval", self.global_step, result))

    def _solved(self) -> bool:
        """This process's last evaluation, or the supervisor's of weights it was sent,
        reached the target return."""
        target = self.cfg.algo.target_return
        return self.weights.solved_step() is not None or (
            target is not None and self.last_eval is not None and
            self.last_eval["return_mean"] >= target)

    def _take_solving_weights(self) -> None:
        """Solved elsewhere: go back to the weights that reached the target (training went
        on while they were evaluated), so that model.pt and the final checkpoint hold the
        policy that was judged."""
        params = self._sent.get(self.weights.solved_step())
        if params is not None:
            load_flat_params(self.policy, params)

    # --- on-policy: staged batches ---------------------------------------------------------
    def _enough_ready(self) -> bool:
        """SYNC: every worker has published a slot; ASYNC: ``batch_slots`` slots are
        published in all."""
        if self.data is DataMode.SYNC:
            return all(r.has_ready_slot() for r in self.rings)
        return sum(r.occupancy() for r in self.rings) >= self.cfg.batch_slots

    def _choose(self) -> list[Ring]:
        """The rings of the next batch's slots, once per slot taken."""
        if self.data is DataMode.SYNC:
            return self.rings
        picks, self._turn = take_turns([r.occupancy() for r in self.rings],
                                       self.cfg.batch_slots, self._turn)
        return [self.rings[i] for i in picks]

    def _next_batch(self, wait: bool) -> StagedBatch | None:
        """Stage the next batch: its slots within the policy-lag bound (older ones are
        dropped and counted), CRC-checked when ``infra.check_slots``. Without ``wait``,
        None when too few slots are ready."""
        while True:
            if not self._enough_ready():
                if not wait:
                    return None
                self._wait(self._enough_ready)
            dropped = drop_stale(self.rings, self.version, self.cfg.policy_lag_bound)
            if not dropped:
                break
            self.dropped_slots += dropped
        with self.timer.stage("update_dataset"):
            batch = self.stager.stage(self._choose(), self.cfg.infra.check_slots)
            self.window.note_slots(batch.host, self.version, self.global_step)
            self._last["ring_occupancy"] = \
                sum(r.occupancy() for r in self.rings) / len(self.rings)
        return batch

    def _update(self) -> None:
        """Train on the next batch and publish the new weights. On CUDA the batch after it
        is staged while the update runs, when its slots are ready already."""
        algo = self.cfg.algo
        # Slots may be ready for good (APPO's workers never wait): look for a stop request
        # here too (no batch is staged ahead once one was made, see _may_stage_ahead).
        if self._staged is None and self._should_stop():
            raise Stopped
        batch, self._staged = self._staged or self._next_batch(wait=True), None
        lr = algo.lr * (1 - self.global_step / algo.total_steps if algo.anneal_lr else 1)
        with self.timer.stage("train"):
            data = batch.use()
            # the statistics first: this batch is trained on with them
            if algo.normalize_obs:
                observe_observations(self.policy, data["obs"])
            if self.reward_scale:
                data = {**data, "reward": data["reward"] * self._reward_factor(batch.host)}
            stats = self.algo.update(data, lr)
            batch.done()
        self.version += 1
        self.global_step += batch.steps
        if self.device.type == "cuda":
            if self._may_stage_ahead():
                self._staged = self._next_batch(wait=False)
            with self.timer.stage("train"):  # (until here only issued)
                torch.cuda.current_stream(self.device).synchronize()
        self._publish()
        self.window.add_update(stats)
        self._last["lr"] = lr
        self.weights.beat(time.monotonic_ns())

    def _reward_factor(self, host: dict[str, np.ndarray]) -> float:
        """Fold a batch's rewards into the return statistics; the factor to scale them by."""
        return self.reward_scale.update(host["reward"], host["terminated"] | host["truncated"],
                                        host["env_id"], self.cfg.infra.envs_per_worker)

    def _may_stage_ahead(self) -> bool:
        """Stage the next batch while this update runs only if the next update is certain to
        train on it: its slots are released once staged, so a batch staged before an
        evaluation, a checkpoint, the end or a stop would be in no checkpoint."""
        return self.stager.asynchronous and not self.weights.stop_requested() and \
            self.global_step < min(self.cfg.algo.total_steps, self.next_eval,
                                   self.next_checkpoint)

    def _timing(self) -> dict[str, float]:
        return timing_metrics("learner", self.timer.seconds())

    # --- off-policy ------------------------------------------------------------------------
    def _offpolicy_round(self) -> None:
        """Ingest the slots the rate limiter admits, take the updates it admits (at most
        MAX_UPDATES_PER_ROUND, so evaluation and checkpoints stay on schedule), publish the
        new weights; wait for an admissible slot when neither is possible."""
        if self._should_stop():  # the waits below may never sleep: slots keep coming
            raise Stopped
        feed, timer = self.feed, self.timer
        with timer.stage("update_dataset"):
            ingested = feed.ingest(lambda slot: self.window.note_slots(
                slot, self.version, feed.inserted))
        self.global_step = feed.inserted
        updates = 0
        while updates < MAX_UPDATES_PER_ROUND and feed.can_train():
            with timer.stage("update_dataset"):
                batch = feed.sample()
            with timer.stage("train"):
                stats, td_abs = self.algo.update(batch)
            with timer.stage("update_dataset"):
                feed.update_priorities(td_abs)
            self.window.add_update(stats)
            updates += 1
        if updates:
            self.version += updates
            self._publish()
        elif not ingested:
            self._wait(feed.can_ingest)
        self.weights.beat(time.monotonic_ns())

    def _report(self) -> None:
        """One ``update`` metrics message for the updates since the last one (every
        ``log.metrics_every_s``): their mean losses (see fastrl.learner.report), the
        episodes that ended, policy lag, and on-policy the last learning rate, ring
        occupancy and slots dropped, off-policy the replay's fill, sample age and samples
        per insert."""
        stats = self.window.stats()
        stats.update(self._last, policy_version=self.version, **self._timing())
        if self.feed:
            stats.update(self.feed.stats())
        else:
            stats["dropped_stale_slots"] = self.dropped_slots
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

    def drain(self) -> None:
        """``algo.name=none``: release every slot as soon as it is published and count its
        steps; nothing is trained, copied or saved (collection throughput)."""
        steps_per_slot = self.cfg.infra.rollout_len * self.cfg.infra.envs_per_worker
        self._publish()
        next_report = time.monotonic()
        try:
            while self.global_step < self.cfg.algo.total_steps:
                if self._should_stop():  # fast workers may never let the wait below sleep
                    raise Stopped
                self._wait(lambda: any(r.has_ready_slot() for r in self.rings))
                for ring in self.rings:
                    while ring.has_ready_slot():
                        ring.release()
                        self.global_step += steps_per_slot
                self.weights.record_step(self.global_step)
                if time.monotonic() >= next_report:
                    next_report = time.monotonic() + self.cfg.log.metrics_every_s
                    self.metrics.put(("update", self.global_step, self._timing()))
        except Stopped:
            self.stopped = True
        finally:
            self.weights.mark_done()
        self._done(None)

    def train(self) -> None:
        """Train until ``algo.total_steps``, the target return, or a stop request (the update
        in progress is finished); checkpoint on the way and at the end, save the model and
        report the last evaluation."""
        algo, log = self.cfg.algo, self.cfg.log
        self._publish()
        try:
            if self.global_step >= self.next_eval:  # resumed from a stop during an evaluation
                self._evaluate()
            step = self._offpolicy_round if self.feed else self._update
            while self.global_step < algo.total_steps and not self._solved():
                step()
                self._checkpoint_written(self._writes.poll())
                if self.global_step >= algo.total_steps or \
                        time.monotonic() >= self._next_report:
                    self._report()
                if self.next_eval <= self.global_step < algo.total_steps:
                    self._evaluate()  # (the last one follows at the end)
                if self.next_checkpoint <= self.global_step < algo.total_steps:
                    with self.timer.stage("checkpoint"):  # (the final one follows at the end)
                        self._checkpoint(final=False)
                    while self.next_checkpoint <= self.global_step:
                        self.next_checkpoint += log.checkpoint_every_steps
            if self.window.updates:  # solved between two reports
                self._report()
            self.weights.mark_done()  # workers may park while we evaluate
            if self.weights.solved_step() is not None:
                self._take_solving_weights()
            elif self.global_step and self.eval_step != self.global_step:
                self._evaluate_here()  # the last one: nothing waits for it any more
        except Stopped:
            self.stopped = True  # save what we have; the evaluation in progress is dropped
        finally:
            self.weights.mark_done()
        with self.timer.stage("checkpoint"):
            self._checkpoint(final=True)
            model = Path(self.spec.run_dir) / "model.pt"
            tmp = model.with_name(f".tmp-model.pt-{os.getpid()}")  # (the last one stays whole)
            with telling_disk_full(model, lambda: tmp.unlink(missing_ok=True)):
                _torch_save({"model": self.policy.state_dict(),
                             "global_step": self.global_step}, tmp)
                os.replace(tmp, model)
        self._done(self.last_eval)

    def _done(self, last_eval: dict[str, float] | None) -> None:
        """The last messages: the episodes not reported yet, then the final evaluation,
        this process's time per stage, and whether a stop request ended the run before its
        end."""
        self._send_episodes()
        self.metrics.put(("done", self.global_step, {
            "eval": last_eval, "timing": self.timer.seconds(), "stopped": self.stopped}))

    def run(self) -> None:
        """Train (or, for ``algo.name=none``, drain) to the end of the run."""
        self.train() if self.spec.plan.trains else self.drain()
