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
    variance and count of every return seen."""

    def __init__(self, num_envs: int, gamma: float) -> None:
        self.gamma = gamma
        self.returns = np.zeros(num_envs, np.float64)
        self.stats = RunningNorm(1)  # (the mean is kept, not used: rewards are only scaled)

    def update(self, reward: np.ndarray, done: np.ndarray, env_id: np.ndarray,
               envs_per_slot: int, weight: np.ndarray | None = None) -> float:
        """Fold a time-major batch ``[T, N]`` in and return the factor its rewards are
        multiplied by. The columns are slots of ``envs_per_slot`` envs in the order they
        were collected (two slots of one worker: the older first). With ``weight`` (a
        batch's, bool), only the steps of weight 1 count in the statistics."""
        seen = np.empty(reward.shape, np.float64)
        for first in range(0, reward.shape[1], envs_per_slot):
            cols = slice(first, first + envs_per_slot)
            ids = env_id[0, cols]
            ret = self.returns[ids]
            for t in range(reward.shape[0]):
                ret = ret * self.gamma + reward[t, cols]
                seen[t, cols] = ret
                ret = np.where(done[t, cols], 0.0, ret)
            self.returns[ids] = ret
        seen = seen if weight is None else seen[weight]
        self.stats.update(torch.from_numpy(seen.reshape(-1, 1)).float())
        return float(torch.rsqrt(self.stats.var + 1e-8))

    def state_dict(self) -> dict[str, torch.Tensor]:
        """What a checkpoint keeps (``--resume`` continues from it)."""
        return {"returns": torch.from_numpy(self.returns.copy()),
                **{k: v.detach().clone() for k, v in self.stats.state_dict().items()}}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`state_dict`."""
        self.returns[:] = state["returns"].cpu().numpy()
        self.stats.load_state_dict({k: state[k] for k in ("mean", "var", "count")})
