"""Return-based reward scaling (``algo.normalize_reward``), as SB3's VecNormalize scales
rewards: each env keeps a running discounted return (``ret = gamma * ret + reward``, zeroed
after the episode ends), and rewards are divided by the standard deviation of every return
seen so far. The learner folds each batch in before training on it and scales the whole
batch by the statistics after it (SB3 scales each step by the statistics before it). The
episode returns that fastrl logs and evaluates stay the env's."""

from __future__ import annotations

import numpy as np
import torch

from fastrl.models.encoders import RunningNorm


class ReturnScale:
    """Running discounted returns of ``num_envs`` envs (by run-wide env id) and the mean,
    variance and count of every return seen. The rows of a slot may fall in groups with
    statistics and a discount of their own (a population's members): ``groups[r]`` is the
    group of row ``r`` of a slot (``envs_per_slot`` long), ``gammas[g]`` group ``g``'s
    discount."""

    def __init__(self, num_envs: int, gammas: list[float], groups: np.ndarray) -> None:
        self.gammas, self.groups = np.asarray(gammas, np.float64), np.asarray(groups)
        self.returns = np.zeros(num_envs, np.float64)
        # (the mean is kept, not used: rewards are only scaled)
        self.stats = [RunningNorm(1) for _ in gammas]

    def update(self, reward: np.ndarray, done: np.ndarray, env_id: np.ndarray,
               envs_per_slot: int, weight: np.ndarray | None = None) -> float | np.ndarray:
        """Fold a time-major batch ``[T, N]`` in and return the factor its rewards are
        multiplied by (with groups, one per column ``[N]``). The columns are slots of
        ``envs_per_slot`` envs in the order they were collected (two slots of one worker:
        the older first). With ``weight`` (a batch's, bool), only the steps of weight 1
        count in the statistics."""
        group = self.groups[np.arange(reward.shape[1]) % envs_per_slot]  # each column's
        gamma = self.gammas[group]
        seen = np.empty(reward.shape, np.float64)
        for first in range(0, reward.shape[1], envs_per_slot):
            cols = slice(first, first + envs_per_slot)
            ids = env_id[0, cols]
            ret = self.returns[ids]
            for t in range(reward.shape[0]):
                ret = ret * gamma[cols] + reward[t, cols]
                seen[t, cols] = ret
                ret = np.where(done[t, cols], 0.0, ret)
            self.returns[ids] = ret
        if len(self.stats) == 1:
            return self._fold(0, seen if weight is None else seen[weight])
        factor = np.empty(reward.shape[1], np.float32)
        for g in range(len(self.stats)):  # (each group's columns in the order collected)
            mine = np.flatnonzero(group == g)
            factor[mine] = self._fold(g, seen[:, mine] if weight is None else
                                      seen[:, mine][weight[:, mine]])
        return factor

    def copy_group(self, group: int, source: int) -> None:
        """Group ``group`` takes ``source``'s return statistics (a member that copies
        another's weights, fastrl.population.pbt)."""
        self.stats[group].load_state_dict(self.stats[source].state_dict())

    def _fold(self, g: int, seen: np.ndarray) -> float:
        """Fold group ``g``'s returns ``seen`` in; its factor."""
        stats = self.stats[g]
        stats.update(torch.from_numpy(seen.reshape(-1, 1)).float())
        return float(torch.rsqrt(stats.var + 1e-8))

    def state_dict(self) -> dict:
        """What a checkpoint keeps (``--resume`` continues from it)."""
        return {"returns": torch.from_numpy(self.returns.copy()),
                **_stats_state(self.stats[0]),
                **({"groups": [_stats_state(s) for s in self.stats]}
                   if len(self.stats) > 1 else {})}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        self.returns[:] = state["returns"].cpu().numpy()
        for stats, saved in zip(self.stats, state.get("groups", [state])):
            stats.load_state_dict({k: saved[k] for k in ("mean", "var", "count")})


def _stats_state(stats: RunningNorm) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in stats.state_dict().items()}
