"""What the learner reports once per logging interval (``log.metrics_every_s``).

Update statistics arrive as 0-d tensors on the learner's device and are summed there: they
cross to the host in one transfer per report, not one per update (a transfer waits for the
GPU to finish everything queued before it). Episode ends and policy lags come from the
host copies of the slots, so noting them costs the device nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch


def ended_episode_stats(ret: np.ndarray, length: np.ndarray) -> dict[str, float]:
    """``episode/*`` statistics of ended episodes' returns and lengths (none: empty)."""
    if not len(ret):
        return {}
    return {
        "episode/return_mean": float(ret.mean()), "episode/return_std": float(ret.std()),
        "episode/return_min": float(ret.min()), "episode/return_max": float(ret.max()),
        "episode/length_mean": float(length.mean()), "episode/count": len(ret),
    }


class ReportWindow:
    """Statistics gathered since the last report. ``row_groups`` names the group of each
    row of an env (a multi-agent env's agent groups, fastrl.plan.RunPlan.episode_groups;
    run-wide row ``i`` is row ``i % len(row_groups)`` of its env): episodes are also
    reported per group. ``episode_stats`` adds statistics of the ended episodes' returns
    (self-play's win rates, fastrl.plan.RunPlan.episode_stats). A batch's optional
    ``weight`` keeps its steps of weight 0 (padding) out of the episodes."""

    def __init__(self, row_groups: tuple[str, ...] = (),
                 episode_stats: Callable[[np.ndarray], dict[str, float]] | None = None
                 ) -> None:
        self.episode_stats = episode_stats
        self.group_names = tuple(dict.fromkeys(row_groups))
        self._group_of = np.array([self.group_names.index(g) for g in row_groups], np.int64)
        self.reset()

    def reset(self) -> None:
        """Start a new window."""
        self.updates = 0
        self._keys: tuple[str, ...] | None = None  # the statistics' names, in order
        self._sums: torch.Tensor | None = None  # their sums (NaN counted as 0) ...
        self._counts: torch.Tensor | None = None  # ... over the updates where not NaN
        self._returns: list[np.ndarray] = []
        self._lengths: list[np.ndarray] = []
        self._steps: list[np.ndarray] = []  # the env step count at each episode's end
        self._times: list[np.ndarray] = []  # when the learner saw it end (Unix seconds)
        self._groups: list[np.ndarray] = []  # each episode's row group, where rows have one
        self._lags = np.zeros(1, np.int64)  # transitions by policy lag
        self._noted = False

    def add_update(self, stats: dict[str, torch.Tensor]) -> None:
        """One update's statistics, summed on their device as one vector (a handful of
        tensor ops per update, whatever the number of statistics); :meth:`stats` averages
        each over the updates where it was not NaN (explained variance is NaN for a batch
        of equal returns: one such batch must not blank the whole report)."""
        keys = tuple(stats)
        values = torch.stack(list(stats.values())).float()
        if self._keys is None:
            self._keys = keys
            self._sums, self._counts = torch.zeros_like(values), torch.zeros_like(values)
        elif keys != self._keys:
            raise ValueError(f"update statistics {keys} differ from the window's {self._keys}")
        self._counts.add_(values == values)  # (False for NaN)
        self._sums.add_(values.nan_to_num(0.0, posinf=torch.inf, neginf=-torch.inf))
        self.updates += 1

    def note_slots(self, host: dict[str, np.ndarray], version: int, steps_before: int) -> None:
        """The episodes that ended in a batch (or slot) and the policy lag of its
        transitions, ``version`` being the learner's policy version when it took them and
        ``steps_before`` the run's env steps before this batch's. A batch is time-major
        ``[T, N]``: an episode that ended at row ``t`` ended at env step
        ``steps_before + (t + 1) * N``; episodes are kept in the order they ended."""
        done = host["terminated"] | host["truncated"]
        weight = host.get("weight")
        if weight is not None:  # (steps of weight 0 end no episode)
            done &= weight
        if done.any():
            rows, cols = np.nonzero(done)  # (row-major: ordered by the step they ended at)
            if len(self._group_of):
                env_ids = host["env_id"][rows, cols]
                self._groups.append(self._group_of[env_ids % len(self._group_of)])
            self._returns.append(host["episode_return"][rows, cols])
            self._lengths.append(host["episode_length"][rows, cols])
            self._steps.append(steps_before + (rows + 1) * done.shape[1])
            self._times.append(np.full(len(rows), time.time()))
        counts = np.bincount(np.maximum(version - host["policy_version"].ravel(), 0))
        if len(counts) > len(self._lags):
            self._lags = np.pad(self._lags, (0, len(counts) - len(self._lags)))
        self._lags[:len(counts)] += counts
        self._noted = True

    def episodes(self) -> dict[str, list]:
        """Every episode that ended in this window, one entry each in the order they ended:
        ``step`` (env steps of the run when it ended), ``return``, ``length``, ``time``
        (Unix seconds when the learner saw it) and, where rows have groups, ``group`` (its
        row's); empty lists when none did."""
        columns = {"step": self._steps, "return": self._returns, "length": self._lengths,
                   "time": self._times}
        out = {name: np.concatenate(parts).tolist() if parts else []
               for name, parts in columns.items()}
        if len(self._group_of):
            out["group"] = [self.group_names[g] for g in
                            (np.concatenate(self._groups) if self._groups else [])]
        return out

    def _group_stats(self, returns: np.ndarray, lengths: np.ndarray) -> dict[str, float]:
        """``episode/<group>/*``: :func:`ended_episode_stats` of each agent group's
        episodes (a multi-agent env's)."""
        if not self._groups:
            return {}
        groups, out = np.concatenate(self._groups), {}
        for g, name in enumerate(self.group_names):
            mine = groups == g
            stats = ended_episode_stats(returns[mine], lengths[mine])
            out.update({k.replace("episode/", f"episode/{name}/"): v for k, v in stats.items()})
        return out

    def stats(self) -> dict[str, float | list[int]]:
        """Mean update statistics, ``episode/*`` of the episodes that ended, and the
        policy lag: ``policy_lag`` (the largest), ``policy_lag_mean`` and
        ``policy_lag/histogram`` (entry k: transitions that lagged k versions)."""
        out: dict[str, float | list[int]] = {}
        if self._keys is not None:
            means = self._sums / self._counts
            out.update(zip(self._keys, means.tolist()))  # the one device -> host transfer
        if self._returns:
            returns, lengths = np.concatenate(self._returns), np.concatenate(self._lengths)
            out.update(ended_episode_stats(returns, lengths))
            out.update(self._group_stats(returns, lengths))
            if self.episode_stats is not None:
                out.update(self.episode_stats(returns))
        if self._noted:
            lags = np.arange(len(self._lags))
            out["policy_lag"] = int(lags[self._lags > 0].max())
            out["policy_lag_mean"] = float((lags * self._lags).sum() / self._lags.sum())
            out["policy_lag/histogram"] = self._lags.tolist()
        return out
