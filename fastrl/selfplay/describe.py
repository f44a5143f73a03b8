"""Self-play's part of ``python -m fastrl.describe`` (fastrl.describe.FEATURE_PARTS)."""

from __future__ import annotations

from typing import Any

from fastrl.core.text import human_bytes
from fastrl.memory.weights import SharedWeights


def part(plan: Any) -> dict[str, Any] | None:
    """The pool of a run (fastrl.plan.RunPlan) that plays itself; None without self-play."""
    sp = plan.cfg.selfplay
    if not sp.enabled:
        return None
    return {"pool_size": sp.pool_size, "snapshot_every": sp.snapshot_every,
            "latest_prob": sp.latest_prob, "pool_banks": plan.pool_banks,
            "pool_bytes": SharedWeights.nbytes(plan.num_params, plan.pool_banks),
            "baseline": sp.baseline or None}


def lines(sp: dict[str, Any]) -> list[str]:
    """Its line in the rollout box."""
    against = sp["baseline"] or "the env's own baseline"
    return [f"self-play: env g's learner in seat g % 2, only its rows train; the other acts "
            f"with the newest policy ({sp['latest_prob']:.0%} of slots) or a snapshot of the "
            f"last {sp['pool_size']} (one every {sp['snapshot_every']} updates, "
            f"{sp['pool_banks']} banks, {human_bytes(sp['pool_bytes'])} after the weights in "
            f"shared memory); evaluations play {against}"]
