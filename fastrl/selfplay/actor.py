"""Self-play in a worker: which rows learn, and the frozen policy the other rows act with.

A two-player game has two rows an env (fastrl.envs.multiagent). Run-wide env ``g`` has its
learner in seat ``g % 2`` (fastrl.selfplay.seats), so both seats are learnt; the other seat
acts with the slot's opponent: the newest policy with probability ``selfplay.latest_prob``,
else a snapshot drawn uniformly from the pool. The draw is a function of the run seed, the
worker, the slot's number and the weights version it is collected with alone: with
deterministic slots, a resumed run, or a second run of the seed, draws the same opponents.

The pool is a :class:`~fastrl.memory.weights.SharedWeights` after the weights in the
weights segment: snapshot ``k`` is the policy of version ``k * snapshot_every``, which the
learner writes as it publishes that version (fastrl.selfplay.pool). A slot collected with
version ``v`` draws from snapshots ``max(0, k - pool_size + 1) .. k``, ``k = v //
snapshot_every``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from torch import nn

from fastrl.memory.weights import SharedWeights
from fastrl.models.actors import Actor
from fastrl.models.policy import load_flat_params
from fastrl.selfplay.config import SelfPlayConfig


def opponent_key(cfg: SelfPlayConfig, seed: int, worker: int, seq: int,
                 version: int) -> int | None:
    """The pool snapshot worker ``worker``'s slot ``seq``, collected with weights
    ``version``, plays against; None for the newest policy."""
    rng = np.random.default_rng([seed, worker, seq])
    if rng.random() < cfg.latest_prob:
        return None
    newest = version // cfg.snapshot_every
    return int(rng.integers(max(0, newest - cfg.pool_size + 1), newest + 1))


class SelfPlayActor(Actor):
    """A worker's actor in self-play: ``learner`` (the policy's actor) for the learning
    rows, ``opponent`` (an actor over ``opponent_policy``, loaded from the pool) for the
    others; log-probabilities and values are the learner's (the other rows do not train:
    :meth:`end_step` weights them 0). ``should_stop`` ends a wait for a pool snapshot."""

    def __init__(self, learner: Actor, opponent_policy: nn.Module, opponent: Actor,
                 learning: np.ndarray, pool: SharedWeights, cfg: SelfPlayConfig, seed: int,
                 worker: int, should_stop: Callable[[], bool]) -> None:
        self.learner, self.opponent, self.opponent_policy = learner, opponent, opponent_policy
        self.learning, self.pool, self.cfg = learning, pool, cfg
        self.seed, self.worker, self.should_stop = seed, worker, should_stop
        self.params = np.empty(pool.vectors[0].shape, np.float32)
        self.key: int | None = None  # the slot's opponent (None: the newest policy)
        self.loaded = -1  # the snapshot in opponent_policy

    def begin_slot(self, slot: dict[str, np.ndarray], seq: int, version: int) -> None:
        """Choose slot ``seq``'s opponent (collected with weights ``version``) and load it."""
        self.learner.begin_slot(slot, seq, version)
        self.key = opponent_key(self.cfg, self.seed, self.worker, seq, version)
        if self.key is not None and self.key != self.loaded:
            self.pool.read_key(self.key, self.params, self.should_stop)
            load_flat_params(self.opponent_policy, self.params)
            self.loaded = self.key

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        action, log_prob, value = self.learner(obs)
        if self.key is None:
            return action, log_prob, value
        other = self.opponent(obs)[0]
        rows = self.learning.reshape(-1, *[1] * (np.ndim(action) - 1))
        return np.where(rows, action, other), log_prob, value

    def end_step(self, terminated: np.ndarray, truncated: np.ndarray,
                 weight: np.ndarray | None) -> None:
        """Only the learning rows' steps train."""
        self.learner.end_step(terminated, truncated, weight)
        if weight is not None:
            weight &= self.learning

    def state(self) -> dict:
        """The learner's actor's."""
        return self.learner.state()

    def restore(self, state: dict) -> None:
        """The learner's actor's."""
        self.learner.restore(state)
