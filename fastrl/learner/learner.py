"""The learner process: drain one slot per worker, train PPO, publish weights, evaluate."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.queues import Queue
from pathlib import Path

import numpy as np
import torch

from fastrl.algos import make_algo
from fastrl.checkpoint import parked_path, save_checkpoint
from fastrl.config import config_hash, to_yaml
from fastrl.evaluation import SeedSuite, evaluate
from fastrl.learner.offpolicy import ReplayFeed, replay_shape
from fastrl.memory.ring import INCARNATION, WRITE_SEQ, Ring
from fastrl.memory.segments import attach
from fastrl.memory.wait import Stopped, wait_until
from fastrl.memory.weights import SharedWeights
from fastrl.models.policy import flat_params, param_shapes
from fastrl.plan import RunPlan
from fastrl.process import become_child, report_crash, rng_state, seed_everything, set_rng_state
from fastrl.timing import StageTimer, timing_metrics

REPORT_EVERY_S = 0.5  # metrics rate of the drain and off-policy loops
MAX_UPDATES_PER_ROUND = 64  # off-policy: updates between looks at the rings and schedule
PARK_WAIT_S = 20.0  # how long the final checkpoint waits for the workers to park


@dataclass
class LearnerSpec:
    """Everything the learner process needs, picklable for ``spawn``; ``resume`` is the
    checkpoint folder to continue from."""

    plan: RunPlan
    ring_names: list[str]
    weights_name: str
    run_dir: str
    parent_pid: int
    resume: str | None = None


def run_learner(spec: LearnerSpec, metrics: Queue) -> None:
    """Process entry point: exit 0 when training ends or the run is stopped, 1 on error."""
    become_child(spec.parent_pid)
    torch.set_num_threads(spec.plan.cfg.infra.learner_threads)
    try:
        plan = spec.plan
        shms = [attach(n) for n in spec.ring_names] + [attach(spec.weights_name)]
        rings = [Ring(s.buf, plan.layout, plan.cfg.infra.ring_slots) for s in shms[:-1]]
        learner = Learner(spec, metrics, rings, SharedWeights(shms[-1].buf, plan.num_params))
        learner.run()
    except BaseException as e:
        report_crash(spec.run_dir, "learner", e)
        os._exit(1)


def gather(rings: list[Ring]) -> dict[str, np.ndarray]:
    """The oldest slot of every ring, concatenated along the env axis (one copy)."""
    slots = [r.read_slot() for r in rings]
    return {
        name: np.concatenate([s[name] for s in slots], axis=0 if name == "bootstrap_obs" else 1)
        for name in slots[0] if name != "checksum"
    }


def ring_shape(cfg, slot_bytes: int) -> dict:
    """What saved slots and parked worker states depend on: a resumed run restores them only
    when all of it is unchanged (a lower lag bound would drop restored slots and put the
    cursors out of step with the weights version; unstamped slots would fail a CRC check)."""
    infra = cfg.infra
    return {"num_workers": infra.num_workers, "envs_per_worker": infra.envs_per_worker,
            "rollout_len": infra.rollout_len, "ring_slots": infra.ring_slots,
            "max_policy_lag": infra.max_policy_lag, "check_slots": infra.check_slots,
            "slot_bytes": slot_bytes, "env_kwargs": dict(cfg.env.kwargs)}


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


def episode_stats(batch: dict[str, np.ndarray]) -> dict[str, float]:
    """Return/length statistics of the episodes that ended inside the batch."""
    done = batch["terminated"] | batch["truncated"]
    return ended_episode_stats(batch["episode_return"][done], batch["episode_length"][done])


def ended_episode_stats(ret: np.ndarray, length: np.ndarray) -> dict[str, float]:
    """``episode/*`` statistics of ended episodes' returns and lengths (none: empty)."""
    if not len(ret):
        return {}
    return {
        "episode/return_mean": float(ret.mean()), "episode/return_std": float(ret.std()),
        "episode/return_min": float(ret.min()), "episode/return_max": float(ret.max()),
        "episode/length_mean": float(length.mean()), "episode/count": len(ret),
    }


def _savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with path.open("wb") as f:
        np.savez(f, **arrays)


class Learner:
    """Owns the model and the algorithm's state; talks to workers only through shared
    memory. On-policy (PPO) it trains on one slot from every worker per update; off-policy
    (DQN, SAC) it feeds slots into a replay buffer and trains on samples of it.

    ``metrics`` takes ``(kind, step, payload)`` messages (a queue to the supervisor, or the
    serial runtime's dispatcher). ``produce``, in the serial runtime, runs the workers for
    a slot each: every wait of the learner calls it, so waiting for data makes the data.
    ``timer`` keeps the learner's time per stage (fastrl.timing).
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
        self.algo = make_algo(cfg.algo, self.policy, plan.obs_space, plan.act_space,
                              self.device) if plan.trains else None
        self.rings, self.weights = rings, weights
        self.produce = produce
        self.timer = timer or StageTimer()
        self.feed = ReplayFeed(cfg, plan.obs_space, plan.act_space, self.rings, self.device,
                               cfg.seed) if cfg.algo.off_policy else None
        self.version = 0
        self.global_step = 0
        self.dropped_slots = 0
        self.next_eval = cfg.log.eval_every_steps
        self.next_checkpoint = cfg.log.checkpoint_every_steps
        self.stopped = False  # a stop request ended training early
        self.last_eval: dict[str, float] | None = None
        self.eval_step = -1
        self._window: dict[str, float] = {}  # off-policy: update statistics summed since the
        self._window_updates = 0  # last report, and how many updates they cover
        self._next_report = time.monotonic()
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

        The final one waits until the workers have parked, so that it also holds their
        states and the slots they published last: a resumed run then sees the same data.
        """
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
        state = {"model": self.policy.state_dict(), "algo": self.algo.state_dict(),
                 "rng": rng_state(), "normalizer": None,  # no observation normalisation yet
                 **{key: getattr(self, key) for key in self.SCHEDULE}}

        rings = {}
        for i, (read_seq, write_seq, data) in enumerate(pending):
            rings[f"seqs{i}"] = np.array([read_seq, write_seq], np.int64)
            rings[f"slots{i}"] = data
        writers = {"learner.pt": lambda p: torch.save(state, p),
                   "rings.npz": lambda p: _savez(p, rings),
                   "config.yaml": lambda p: p.write_text(to_yaml(self.cfg))}
        for i, src in parked.items():
            writers[f"worker-{i}.pkl"] = lambda p, src=src: shutil.copyfile(src, p)
        if self.feed:
            state["replay"] = self.feed.state()
            writers["replay.npz"] = lambda p: _savez(p, self.feed.buffer.state_dict())
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
        path = save_checkpoint(self.spec.run_dir, self.global_step, writers, info,
                               self.cfg.log.keep_checkpoints)
        for src in parked.values():
            src.unlink()
        self.metrics.put(("checkpoint", self.global_step, {"path": str(path)}))

    # --- training --------------------------------------------------------------------------
    def _publish(self) -> None:
        with self.timer.stage("sync_weights"):
            self.weights.write(flat_params(self.policy), self.version)

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
        log = self.cfg.log
        suite = SeedSuite.of(log)
        self.policy.eval()
        with self.timer.stage("evaluate"):
            result = evaluate(self.policy, self.spec.plan.env, suite.seeds, self.device,
                              suite.max_steps, self._should_stop,
                              episodes_per_seed=suite.episodes_per_seed)
        self.policy.train()
        self.last_eval, self.eval_step = result, self.global_step
        while self.next_eval <= self.global_step:  # advanced only once the evaluation is done
            self.next_eval += log.eval_every_steps
        self.metrics.put(("eval", self.global_step, result))

    def _solved(self) -> bool:
        target = self.cfg.algo.target_return
        return target is not None and self.last_eval is not None and \
            self.last_eval["return_mean"] >= target

    def _take_slots(self) -> dict[str, np.ndarray]:
        """One slot from every worker, within the policy-lag bound (older ones are dropped
        and counted), verified when ``infra.check_slots``; released once copied."""
        infra = self.cfg.infra
        while True:
            self._wait(lambda: all(r.has_ready_slot() for r in self.rings))
            dropped = drop_stale(self.rings, self.version, infra.max_policy_lag)
            if not dropped:
                break
            self.dropped_slots += dropped
        with self.timer.stage("update_dataset"):
            if infra.check_slots:
                for r in self.rings:
                    r.verify()
            batch = gather(self.rings)
            for r in self.rings:
                r.release()
        return batch

    def _update(self) -> None:
        """Wait for one slot from every worker, train on them, publish the new weights."""
        algo = self.cfg.algo
        batch = self._take_slots()
        with self.timer.stage("update_dataset"):
            occupancy = sum(r.occupancy() for r in self.rings) / len(self.rings)
            lag = self.version - int(batch["policy_version"].min())
            tensors = {k: torch.from_numpy(v).to(self.device) for k, v in batch.items()}
        lr = algo.lr * (1 - self.global_step / algo.total_steps if algo.anneal_lr else 1)
        with self.timer.stage("train"):
            stats = self.algo.update(tensors, lr)
        self.version += 1
        self._publish()
        self.global_step += batch["reward"].size
        self.weights.beat(time.monotonic_ns())
        stats.update(episode_stats(batch), lr=lr, policy_lag=lag, ring_occupancy=occupancy,
                     policy_version=self.version, dropped_stale_slots=self.dropped_slots,
                     **self._timing())
        self.metrics.put(("update", self.global_step, stats))

    def _timing(self) -> dict[str, float]:
        return timing_metrics("learner", self.timer.seconds())

    def _offpolicy_round(self) -> None:
        """Ingest the slots the rate limiter admits, take the updates it admits (at most
        MAX_UPDATES_PER_ROUND, so evaluation and checkpoints stay on schedule), publish the
        new weights; wait for an admissible slot when neither is possible."""
        if self._should_stop():  # the waits below may never sleep: slots keep coming
            raise Stopped
        feed, timer = self.feed, self.timer
        with timer.stage("update_dataset"):
            ingested = feed.ingest()
        self.global_step = feed.inserted
        updates = 0
        while updates < MAX_UPDATES_PER_ROUND and feed.can_train():
            with timer.stage("update_dataset"):
                batch = feed.sample()
            with timer.stage("train"):
                stats, td_abs = self.algo.update(batch)
            with timer.stage("update_dataset"):
                feed.update_priorities(td_abs)
            for key, value in stats.items():
                self._window[key] = self._window.get(key, 0.0) + value
            updates += 1
        if updates:
            self.version += updates
            self._publish()
            self._window_updates += updates
        elif not ingested:
            self._wait(feed.can_ingest)
        self.weights.beat(time.monotonic_ns())

    def _report_offpolicy(self) -> None:
        """One ``update`` metrics message for the updates since the last one: their mean
        losses, the episodes that ended, replay fill, sample age, samples per insert and
        policy lag (updates between the weights a slot was collected with and now)."""
        feed, n = self.feed, max(1, self._window_updates)
        stats = {k: v / n for k, v in self._window.items()}
        stats.update(feed.stats(), policy_version=self.version, **self._timing())
        if feed.returns:
            stats.update(ended_episode_stats(np.concatenate(feed.returns),
                                             np.concatenate(feed.lengths)))
        if feed.oldest_version is not None:
            stats["policy_lag"] = self.version - feed.oldest_version
        self.metrics.put(("update", self.global_step, stats))
        feed.reset_window()
        self._window, self._window_updates = {}, 0
        self._next_report = time.monotonic() + REPORT_EVERY_S

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
                if time.monotonic() >= next_report:
                    next_report = time.monotonic() + REPORT_EVERY_S
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
                if self.feed and (self.global_step >= algo.total_steps or
                                  time.monotonic() >= self._next_report):
                    self._report_offpolicy()  # (throttled: updates come by the thousand)
                if self.global_step >= self.next_eval:
                    self._evaluate()
                if self.next_checkpoint <= self.global_step < algo.total_steps:
                    with self.timer.stage("checkpoint"):  # (the final one follows at the end)
                        self._checkpoint(final=False)
                    while self.next_checkpoint <= self.global_step:
                        self.next_checkpoint += log.checkpoint_every_steps
            self.weights.mark_done()  # workers may park while we evaluate
            if self.global_step and self.eval_step != self.global_step:
                self._evaluate()
        except Stopped:
            self.stopped = True  # save what we have; the evaluation in progress is dropped
        finally:
            self.weights.mark_done()
        with self.timer.stage("checkpoint"):
            self._checkpoint(final=True)
            torch.save({"model": self.policy.state_dict(), "global_step": self.global_step},
                       Path(self.spec.run_dir) / "model.pt")
        self._done(self.last_eval)

    def _done(self, last_eval: dict[str, float] | None) -> None:
        """The last message: the final evaluation, this process's time per stage, and
        whether a stop request ended the run before its end."""
        self.metrics.put(("done", self.global_step, {
            "eval": last_eval, "timing": self.timer.seconds(), "stopped": self.stopped}))

    def run(self) -> None:
        """Train (or, for ``algo.name=none``, drain) to the end of the run."""
        self.train() if self.spec.plan.trains else self.drain()
