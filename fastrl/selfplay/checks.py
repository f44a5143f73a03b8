"""Self-play's checks of a run beyond the feature pairs (those are fastrl.compat's): a
baseline that imports, and a resumed run whose pool keeps its shape."""

from __future__ import annotations

from fastrl.envs.source import load_factory
from fastrl.selfplay.config import SelfPlayConfig

#: the self-play settings that shape the pool a checkpoint holds
POOL_SHAPE = ("enabled", "pool_size", "snapshot_every")


def check_baseline(cfg: SelfPlayConfig) -> None:
    """With self-play, ``selfplay.baseline`` imports (an EnvError naming it otherwise)."""
    if cfg.enabled and cfg.baseline:
        load_factory(cfg.baseline, "selfplay.baseline")


def pool_reshaped(before: SelfPlayConfig, now: SelfPlayConfig) -> list[str]:
    """``selfplay.<key>: old -> new`` for each setting that shapes the pool and changed: a
    checkpoint's snapshots would be missing, or in other banks, for the new config."""
    return [f"selfplay.{k}: {getattr(before, k)} -> {getattr(now, k)}" for k in POOL_SHAPE
            if getattr(before, k) != getattr(now, k)]
