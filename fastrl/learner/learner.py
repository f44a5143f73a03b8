"""The learner process: drain one slot per worker, train PPO, publish weights, evaluate."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from multiprocessing.queues import Queue
from pathlib import Path

import numpy as np
import torch

from fastrl.algos.ppo import PPO
from fastrl.evaluation import evaluate
from fastrl.memory.ring import Ring
from fastrl.memory.segments import attach
from fastrl.memory.wait import Stopped, wait_until
from fastrl.memory.weights import SharedWeights
from fastrl.models.policy import flat_params
from fastrl.plan import RunPlan
from fastrl.process import become_child, report_crash, seed_everything

REPORT_EVERY_S = 0.5  # metrics rate of the drain loop


class PolicyLagError(RuntimeError):
    """A slot was produced by weights older than ``infra.max_policy_lag`` allows."""


@dataclass
class LearnerSpec:
    """Everything the learner process needs, picklable for ``spawn``."""

    plan: RunPlan
    ring_names: list[str]
    weights_name: str
    run_dir: str
    error_dir: str
    parent_pid: int


def run_learner(spec: LearnerSpec, metrics: Queue) -> None:
    """Process entry point: exit 0 when training ends or the run is stopped, 1 on error."""
    become_child(spec.parent_pid)
    torch.set_num_threads(spec.plan.cfg.infra.learner_threads)
    try:
        learner = Learner(spec, metrics)
        learner.train() if spec.plan.trains else learner.drain()
    except BaseException as e:
        report_crash(spec.error_dir, "learner", e)
        os._exit(1)


def gather(rings: list[Ring]) -> dict[str, np.ndarray]:
    """The oldest slot of every ring, concatenated along the env axis (one copy)."""
    slots = [r.read_slot() for r in rings]
    return {
        name: np.concatenate([s[name] for s in slots], axis=0 if name == "bootstrap_obs" else 1)
        for name in slots[0]
    }


def episode_stats(batch: dict[str, np.ndarray]) -> dict[str, float]:
    """Return/length statistics of the episodes that ended inside the batch."""
    done = batch["terminated"] | batch["truncated"]
    if not done.any():
        return {}
    ret, length = batch["episode_return"][done], batch["episode_length"][done]
    return {
        "episode/return_mean": float(ret.mean()), "episode/return_std": float(ret.std()),
        "episode/return_min": float(ret.min()), "episode/return_max": float(ret.max()),
        "episode/length_mean": float(length.mean()), "episode/count": int(done.sum()),
    }


class Learner:
    """Owns the model and the PPO state; talks to workers only through shared memory."""

    def __init__(self, spec: LearnerSpec, metrics: Queue) -> None:
        plan = spec.plan
        cfg = plan.cfg
        self.spec, self.cfg, self.metrics = spec, cfg, metrics
        seed_everything(cfg.seed)
        self.device = torch.device(plan.device)
        self.policy = plan.policy().to(self.device)
        self.ppo = PPO(self.policy, cfg.algo) if plan.trains else None
        self._shms = [attach(n) for n in spec.ring_names]
        self.rings = [Ring(s.buf, plan.layout, cfg.infra.ring_slots) for s in self._shms]
        self._weights_shm = attach(spec.weights_name)
        self.weights = SharedWeights(self._weights_shm.buf, plan.num_params)
        self.version = 0
        self.global_step = 0

    def _publish(self) -> None:
        self.weights.write(flat_params(self.policy), self.version)

    def _should_stop(self) -> bool:
        self.weights.beat(time.monotonic_ns())  # called from every wait: a waiting learner lives
        return self.weights.stop_requested()

    def _evaluate(self) -> dict[str, float]:
        log = self.cfg.log
        seeds = list(range(log.eval_seed, log.eval_seed + log.eval_episodes))
        self.policy.eval()
        result = evaluate(self.policy, self.cfg.env.id, dict(self.cfg.env.kwargs), seeds,
                          self.device, log.eval_max_steps, self._should_stop)
        self.policy.train()
        self.metrics.put(("eval", self.global_step, result))
        return result

    def _check_lag(self, batch: dict[str, np.ndarray]) -> int:
        lag = self.version - int(batch["policy_version"].min())
        if lag > self.cfg.infra.max_policy_lag:
            raise PolicyLagError(
                f"slot data is {lag} policy versions old; infra.max_policy_lag="
                f"{self.cfg.infra.max_policy_lag} allows at most that many"
            )
        return lag

    def _update(self) -> None:
        """Wait for one slot from every worker, train on them, publish the new weights."""
        algo = self.cfg.algo
        wait_until(lambda: all(r.has_ready_slot() for r in self.rings), self._should_stop)
        occupancy = sum(r.occupancy() for r in self.rings) / len(self.rings)
        batch = gather(self.rings)
        for r in self.rings:
            r.release()
        lag = self._check_lag(batch)
        tensors = {k: torch.from_numpy(v).to(self.device) for k, v in batch.items()}
        lr = algo.lr * (1 - self.global_step / algo.total_steps if algo.anneal_lr else 1)
        stats = self.ppo.update(tensors, lr)
        self.version += 1
        self._publish()
        self.global_step += batch["reward"].size
        self.weights.beat(time.monotonic_ns())
        stats.update(episode_stats(batch), lr=lr, policy_lag=lag,
                     ring_occupancy=occupancy, policy_version=self.version)
        self.metrics.put(("update", self.global_step, stats))

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
                wait_until(lambda: any(r.has_ready_slot() for r in self.rings),
                           self._should_stop)
                for ring in self.rings:
                    while ring.has_ready_slot():
                        ring.release()
                        self.global_step += steps_per_slot
                if time.monotonic() >= next_report:
                    next_report = time.monotonic() + REPORT_EVERY_S
                    self.metrics.put(("update", self.global_step, {}))
        except Stopped:
            pass
        finally:
            self.weights.mark_done()
        self.metrics.put(("done", self.global_step, {"eval": None}))

    def train(self) -> None:
        """Train until ``algo.total_steps``, the target return, or a stop request; then save
        the model and report the last evaluation."""
        algo, log = self.cfg.algo, self.cfg.log
        self._publish()
        next_eval = log.eval_every_steps
        last_eval: dict[str, float] | None = None
        eval_step = -1
        try:
            while self.global_step < algo.total_steps:
                self._update()
                if self.global_step >= next_eval:
                    next_eval += log.eval_every_steps
                    last_eval, eval_step = self._evaluate(), self.global_step
                    if algo.target_return is not None and \
                            last_eval["return_mean"] >= algo.target_return:
                        break
            self.weights.mark_done()  # workers may exit while we evaluate and save
            if self.global_step and eval_step != self.global_step:
                last_eval = self._evaluate()
        except Stopped:
            pass  # asked to stop: save what we have; the evaluation in progress is dropped
        finally:
            self.weights.mark_done()
        torch.save({"model": self.policy.state_dict(), "global_step": self.global_step},
                   Path(self.spec.run_dir) / "model.pt")
        self.metrics.put(("done", self.global_step, {"eval": last_eval}))
