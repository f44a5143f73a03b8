"""The pool of past policies: how many banks it takes, and its publisher, the learner hook
that writes a snapshot beside every ``selfplay.snapshot_every``-th publish."""

from __future__ import annotations

from torch import nn

from fastrl.memory.weights import SharedWeights
from fastrl.models.policy import flat_params
from fastrl.selfplay.config import SelfPlayConfig


def pool_banks(cfg: SelfPlayConfig, policy_lag_bound: int) -> int:
    """Banks of the pool (0 without self-play): ``selfplay.pool_size``, and room for the
    snapshots the learner may write while a worker still acts with weights
    ``policy_lag_bound`` versions old (fastrl.selfplay.actor)."""
    if not cfg.enabled:
        return 0
    return cfg.pool_size + policy_lag_bound // cfg.snapshot_every + 2


class PoolPublisher:
    """Snapshot ``k`` of the policy is its version ``k * snapshot_every``, written into
    ``pool`` as the learner publishes that version; the pool's banks go into the learner's
    checkpoint state (``selfplay_pool``) and come back on resume."""

    def __init__(self, pool: SharedWeights, snapshot_every: int) -> None:
        self.pool, self.snapshot_every = pool, snapshot_every

    def published(self, policy: nn.Module, version: int) -> None:
        """The learner published ``policy`` as weights ``version``."""
        if version % self.snapshot_every == 0:
            self.pool.write(flat_params(policy), version, version // self.snapshot_every)

    def state(self) -> dict:
        """Every snapshot the pool holds."""
        return {"selfplay_pool": self.pool.banks_state()}

    def restore(self, state: dict) -> None:
        """Write back the snapshots of a checkpoint's learner ``state``."""
        self.pool.restore_banks(state.get("selfplay_pool"))
