"""The ``selfplay`` config section."""

from __future__ import annotations

from dataclasses import dataclass

from fastrl.core.settings import setting


@dataclass
class SelfPlayConfig:
    """Self-play in a two-player game (docs/multi-agent.md): in each env one player is the
    learner, the other acts with a frozen past version of the policy from a pool."""

    enabled: bool = setting(False, "train one player of each env of a two-agent game against "
                            "the pool of past policies (and the newest); the other "
                            "player's rows act but do not train")
    pool_size: int = setting(8, "frozen past policies kept in the pool (in shared memory)",
                             gt=0)
    snapshot_every: int = setting(10, "updates between snapshots of the policy into the pool",
                                  gt=0)
    latest_prob: float = setting(0.5, "chance that a slot's opponent is the newest policy "
                                 "rather than a snapshot drawn from the pool", ge=0, le=1)
    baseline: str = setting("", "import string 'module:Factory' of the scripted opponent "
                            "evaluations play (Factory(seed) then called on observations "
                            "[n, *obs] for actions; win rate logged as eval/win_rate); empty: "
                            "the env's own (its 'baseline' attribute, as fastrl/Duel-v0's), "
                            "else evaluations play the policy against itself")
