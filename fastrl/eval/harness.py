"""Deterministic evaluation on a fixed seed suite: the bar a trained policy is judged by.

A seed suite is ``num_seeds`` envs seeded ``first_seed, first_seed + 1, ...``, each playing
``episodes_per_seed`` episodes with the policy's mode action (argmax, the Gaussian mean,
the greedy Q action: never an exploration draw). Episode 0 of a seed starts from
``reset(seed=seed)``; episode k > 0 continues the same env after the reset it does itself in
the step that ends episode k - 1 (no new seed), so a suite is one deterministic sequence
per seed. All the suite's envs step together, one batched forward per step.

:func:`evaluate` returns the flat summary the learner logs (``eval/*``),
:func:`evaluate_episodes` every episode, per seed. Checkpoints are evaluated on a
:class:`SeedSuite` by :mod:`fastrl.eval`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from fastrl.config import LogConfig
from fastrl.envs.batched import live_rows_of
from fastrl.envs.source import EnvSource
from fastrl.memory.control import RunControl
from fastrl.memory.wait import Stopped
from fastrl.models.actors import RecurrentActor
from fastrl.models.recurrent import is_recurrent
from fastrl.population.policy import PopulationPolicy, member_results, members_summary
from fastrl.selfplay.config import SelfPlayConfig
from fastrl.selfplay.games import baseline_of, win_rates
from fastrl.selfplay.seats import learning_rows
from fastrl.telemetry.aggregate import aggregate_iqm, aggregate_mean, interval_estimates

# SeedSuite field: (least value accepted, its python -m fastrl.eval flag, its config key)
SUITE_FIELDS = {
    "first_seed": (0, "--first-seed", "log.eval_seed"),
    "num_seeds": (1, "--seeds", "log.eval_episodes"),
    "episodes_per_seed": (1, "--episodes-per-seed", "log.eval_episodes_per_seed"),
    "max_steps": (1, "--max-steps", "log.eval_max_steps"),
}


class EvalError(ValueError):
    """An evaluation that cannot run as asked: a bad seed suite or device, checkpoints of
    different envs, or a checkpoint whose observation normalisation cannot be applied."""


def summarize(returns: np.ndarray, lengths: np.ndarray,
              zero_sum: bool = False) -> dict[str, float]:
    """Mean/std/min/max of episode returns and lengths, and the episode count, as flat
    floats (what TensorBoard logs under ``eval/``); for the games of a zero-sum game, also
    ``win_rate`` and ``draw_rate`` (a return above, and at, zero)."""
    stats = {"episodes": float(np.size(returns))}
    for name, values in (("return", returns), ("length", lengths)):
        values = np.asarray(values, np.float64)
        stats.update({f"{name}_mean": float(values.mean()), f"{name}_std": float(values.std()),
                      f"{name}_min": float(values.min()), f"{name}_max": float(values.max())})
    return {**stats, **(win_rates(returns) if zero_sum else {})}


@dataclass(frozen=True)
class Episodes:
    """Every episode of a seed suite: row i is seed ``seeds[i]``, column k its episode k."""

    seeds: list[int]
    returns: np.ndarray  # [seeds, episodes_per_seed] float64
    lengths: np.ndarray  # [seeds, episodes_per_seed] int64
    zero_sum: bool = False  # self-play's games: win and draw rates too

    def summary(self) -> dict[str, float]:
        """Statistics over all episodes (see :func:`summarize`)."""
        return summarize(self.returns, self.lengths, self.zero_sum)

    def per_seed(self) -> list[dict[str, Any]]:
        """One entry per seed: ``seed``, its episodes' ``returns`` and ``lengths``, and
        their statistics (see :func:`summarize`)."""
        return [{"seed": seed, "returns": r.tolist(), "lengths": n.tolist(),
                 **summarize(r, n, self.zero_sum)}
                for seed, r, n in zip(self.seeds, self.returns, self.lengths)]


def evaluate_episodes(
    policy: nn.Module, env: EnvSource, seeds: list[int],
    device: torch.device | str = "cpu", max_steps: int = 100_000,
    should_stop: Callable[[], bool] = lambda: False, episodes_per_seed: int = 1,
    selfplay: SelfPlayConfig | None = None,
) -> Episodes:
    """Play ``episodes_per_seed`` episodes of one env per seed with the policy's mode action.

    An env that has played its episodes keeps stepping (uncounted) so that one batched
    forward serves every step. An episode still running after ``max_steps`` steps is cut
    there and counted; the env is not reset then (an env resets only itself), so the seed's
    next episode continues from where the cut one stopped. ``should_stop`` is asked every
    step and raises :class:`~fastrl.memory.wait.Stopped` when true.

    A multi-agent env (fastrl.envs.multiagent) plays each agent's episodes in its row; a
    seed's return and length are the mean over its agents (agents that never play an
    episode aside). With ``selfplay`` enabled, only the learner's seat of each game counts
    (alternating with the seed, fastrl.selfplay.seats.learning_rows): the other plays
    the scripted baseline (fastrl.selfplay.games.baseline_of), and the summary has the
    win rate (none without a baseline: the policy then plays itself).
    """
    envs = env.make(seeds)
    n = envs.num_envs  # rows: len(seeds) times a multi-agent env's agents
    playing = selfplay is not None and selfplay.enabled
    learning = learning_rows(0, n) if playing else np.ones(n, np.bool_)
    opponent = baseline_of(selfplay, envs, seeds[0]) if playing else None
    returns = np.full((n, episodes_per_seed), np.nan)
    lengths = np.full((n, episodes_per_seed), np.nan)
    played = np.zeros(n, np.int64)  # finished episodes per row
    running_return, running_length = np.zeros(n), np.zeros(n, np.int64)
    # a recurrent policy's states: zeroed where an episode ends, not where one is cut
    memory = RecurrentActor(policy, True, device) if is_recurrent(policy) else None
    obs = envs.reset()
    live = live_rows(envs) & learning
    try:
        while ((played < episodes_per_seed) & live).any():
            if should_stop():
                raise Stopped
            if memory is None:
                actions = policy.act(torch.as_tensor(obs, device=device),
                                     deterministic=True)[0].cpu().numpy()
            else:
                actions = memory(obs)[0]
            if opponent is not None:
                actions = np.where(learning, actions, opponent(obs))
            obs, reward, terminated, truncated, _ = envs.step(actions)
            if memory is not None:
                memory.episodes_ended(terminated | truncated)
            running_return += reward
            running_length += live
            ended = (terminated | truncated | (running_length >= max_steps)) & \
                (played < episodes_per_seed) & live
            rows = np.flatnonzero(ended)
            returns[rows, played[rows]] = running_return[rows]
            lengths[rows, played[rows]] = running_length[rows]
            played += ended
            running_return[ended], running_length[ended] = 0.0, 0
            live = live_rows(envs) & learning
    finally:
        envs.close()
    per_seed = (len(seeds), n // len(seeds), episodes_per_seed)
    with warnings.catch_warnings():  # (an agent that played no episode is NaN)
        warnings.simplefilter("ignore", RuntimeWarning)
        return Episodes(list(seeds), np.nanmean(returns.reshape(per_seed), 1),
                        np.nanmean(lengths.reshape(per_seed), 1).round().astype(np.int64),
                        zero_sum=opponent is not None)


def live_rows(envs: Any) -> np.ndarray:
    """The rows whose agents are live now (fastrl.envs.batched.live_rows_of), else all."""
    live = live_rows_of(envs)
    return np.ones(envs.num_envs, np.bool_) if live is None else live().copy()


def evaluate(
    policy: nn.Module, env: EnvSource, seeds: list[int],
    device: torch.device | str = "cpu", max_steps: int = 100_000,
    should_stop: Callable[[], bool] = lambda: False, episodes_per_seed: int = 1,
    selfplay: SelfPlayConfig | None = None,
) -> dict[str, float]:
    """The flat summary (:func:`summarize`) of :func:`evaluate_episodes` over all episodes;
    a population's, of each member's (:func:`population_summary`)."""
    if isinstance(policy, PopulationPolicy):
        return population_summary([
            evaluate(member, env, seeds, device, max_steps, should_stop, episodes_per_seed,
                     selfplay) for member in policy.members])
    return evaluate_episodes(policy, env, seeds, device, max_steps, should_stop,
                             episodes_per_seed, selfplay).summary()


#: bootstrap replicates of a population's aggregate intervals, and their fixed seed (the
#: same evaluation reports the same interval)
AGGREGATE_REPS, AGGREGATE_SEED = 10_000, 0


def population_summary(results: list[dict[str, float]]) -> dict[str, float]:
    """Every member's evaluation (``results[k]``: member ``k``'s summary) as one flat
    summary (fastrl.population.policy.members_summary), with the members' mean and
    interquartile mean of ``return_mean`` and their 95% stratified-bootstrap intervals
    (fastrl.telemetry.aggregate): ``return_mean_ci_low`` / ``_ci_high``, ``iqm_return``,
    ``iqm_return_ci_low`` / ``_ci_high``."""
    out = members_summary(results)
    estimates = interval_estimates(
        np.array([r["return_mean"] for r in results]), {"mean": aggregate_mean,
                                                         "iqm": aggregate_iqm},
        reps=AGGREGATE_REPS, rng=np.random.default_rng(AGGREGATE_SEED))
    mean, iqm = estimates["mean"], estimates["iqm"]
    out.update(return_mean_ci_low=mean.low, return_mean_ci_high=mean.high,
               iqm_return=iqm.value, iqm_return_ci_low=iqm.low, iqm_return_ci_high=iqm.high)
    return out


def solved_members(result: dict[str, float], target: float | None) -> list[int]:
    """The members whose evaluation in ``result`` reaches the target return (a
    population's: each member's own mean return; one policy's: [0] or [])."""
    if target is None:
        return []
    members = member_results(result) or [result]
    return [k for k, r in enumerate(members) if r["return_mean"] >= target]


def record_solved(control: RunControl, step: int, result: dict[str, float],
                  target: float | None) -> None:
    """Mark in the run's control block each member the evaluation ``result`` of the
    weights of env step ``step`` solved (fastrl.memory.control: a member stays solved at
    its first step); a population's ``result`` then also tells how many members are solved
    (``members_solved``) and at which env step each was (``member<k>/solved_step``)."""
    for member in solved_members(result, target):
        control.mark_solved(step, member)
    if control.members > 1 and target is not None:
        steps = [control.member_solved_step(k) for k in range(control.members)]
        result["members_solved"] = float(sum(s is not None for s in steps))
        result.update({f"member{k}/solved_step": float(s)
                       for k, s in enumerate(steps) if s is not None})


@dataclass(frozen=True)
class SeedSuite:
    """The fixed episodes policies are judged on: ``num_seeds`` seeds from ``first_seed``,
    ``episodes_per_seed`` episodes each, each cut at ``max_steps`` steps."""

    first_seed: int
    num_seeds: int
    episodes_per_seed: int = 1
    max_steps: int = 100_000

    def __post_init__(self) -> None:
        for name, (least, flag, key) in SUITE_FIELDS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or value < least:
                raise EvalError(f"seed suite {name}={value!r} ({flag}, {key}): expected an "
                                f"integer >= {least}")

    @classmethod
    def of(cls, log: LogConfig) -> SeedSuite:
        """The suite a run's config evaluates on (``log.eval_*``)."""
        return cls(**{name: getattr(log, key.removeprefix("log."))
                      for name, (_, _, key) in SUITE_FIELDS.items()})

    @property
    def seeds(self) -> list[int]:
        """The env seeds, one per env."""
        return list(range(self.first_seed, self.first_seed + self.num_seeds))
