"""Deterministic evaluation on a fixed seed suite: the bar a trained policy is judged by.

A seed suite is ``num_seeds`` envs seeded ``first_seed, first_seed + 1, ...``, each playing
``episodes_per_seed`` episodes with the policy's mode action (argmax, the Gaussian mean,
the greedy Q action: never an exploration draw). Episode 0 of a seed starts from
``reset(seed=seed)``; episode k > 0 continues the same env after the reset it does itself in
the step that ends episode k - 1 (no new seed), so a suite is one deterministic sequence
per seed. All the suite's envs step together, one batched forward per step.

:func:`evaluate` returns the flat summary the learner logs (``eval/*``);
:func:`evaluate_episodes` every episode, per seed; :func:`evaluate_checkpoints` evaluates
checkpoints on one suite for ``python -m fastrl.eval``; :func:`evaluate_checkpoint_to` is
what a separate process runs to evaluate a checkpoint written during training.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from fastrl.checkpoint import (
    Checkpoint,
    LoadedPolicy,
    find_checkpoint,
    load_policy,
    write_atomically,
)
from fastrl.config import ConfigError, LogConfig
from fastrl.memory.wait import Stopped
from fastrl.plan import resolve_device
from fastrl.process import become_child
from fastrl.rollout.envs import EnvSource

DEVICES = ("cpu", "cuda", "auto")
# SeedSuite field: (least value accepted, its python -m fastrl.eval flag, its config key)
SUITE_FIELDS = {
    "first_seed": (0, "--first-seed", "log.eval_seed"),
    "num_seeds": (1, "--seeds", "log.eval_episodes"),
    "episodes_per_seed": (1, "--episodes-per-seed", "log.eval_episodes_per_seed"),
    "max_steps": (1, "--max-steps", "log.eval_max_steps"),
}
# What must match for two checkpoints to be evaluated on one env: manifest key, its name.
SAME_ENV_KEYS = (("env_id", "env.id"), ("observation_space", "observation space"),
                 ("action_space", "action space"))


class EvalError(ValueError):
    """An evaluation that cannot run as asked: a bad seed suite or device, checkpoints of
    different envs, or a checkpoint whose observation normalisation cannot be applied."""


def summarize(returns: np.ndarray, lengths: np.ndarray) -> dict[str, float]:
    """Mean/std/min/max of episode returns and lengths, and the episode count, as flat
    floats (what TensorBoard logs under ``eval/``)."""
    stats = {"episodes": float(np.size(returns))}
    for name, values in (("return", returns), ("length", lengths)):
        values = np.asarray(values, np.float64)
        stats.update({f"{name}_mean": float(values.mean()), f"{name}_std": float(values.std()),
                      f"{name}_min": float(values.min()), f"{name}_max": float(values.max())})
    return stats


@dataclass(frozen=True)
class Episodes:
    """Every episode of a seed suite: row i is seed ``seeds[i]``, column k its episode k."""

    seeds: list[int]
    returns: np.ndarray  # [seeds, episodes_per_seed] float64
    lengths: np.ndarray  # [seeds, episodes_per_seed] int64

    def summary(self) -> dict[str, float]:
        """Statistics over all episodes (see :func:`summarize`)."""
        return summarize(self.returns, self.lengths)

    def per_seed(self) -> list[dict[str, Any]]:
        """One entry per seed: ``seed``, its episodes' ``returns`` and ``lengths``, and
        their statistics (see :func:`summarize`)."""
        return [{"seed": seed, "returns": r.tolist(), "lengths": n.tolist(), **summarize(r, n)}
                for seed, r, n in zip(self.seeds, self.returns, self.lengths)]


def evaluate_episodes(
    policy: nn.Module, env: EnvSource, seeds: list[int],
    device: torch.device | str = "cpu", max_steps: int = 100_000,
    should_stop: Callable[[], bool] = lambda: False, episodes_per_seed: int = 1,
) -> Episodes:
    """Play ``episodes_per_seed`` episodes of one env per seed with the policy's mode action.

    An env that has played its episodes keeps stepping (uncounted) so that one batched
    forward serves every step. An episode still running after ``max_steps`` steps is cut
    there and counted; the env is not reset then (an env resets only itself), so the seed's
    next episode continues from where the cut one stopped. ``should_stop`` is asked every
    step and raises :class:`~fastrl.memory.wait.Stopped` when true.
    """
    n = len(seeds)
    returns = np.zeros((n, episodes_per_seed))
    lengths = np.zeros((n, episodes_per_seed), np.int64)
    played = np.zeros(n, np.int64)  # finished episodes per env
    running_return, running_length = np.zeros(n), np.zeros(n, np.int64)
    envs = env.make(seeds)
    obs = envs.reset()
    try:
        while (played < episodes_per_seed).any():
            if should_stop():
                raise Stopped
            actions, _, _ = policy.act(torch.as_tensor(obs, device=device), deterministic=True)
            obs, reward, terminated, truncated, _ = envs.step(actions.cpu().numpy())
            running_return += reward
            running_length += 1
            ended = (terminated | truncated | (running_length >= max_steps)) & \
                (played < episodes_per_seed)
            rows = np.flatnonzero(ended)
            returns[rows, played[rows]] = running_return[rows]
            lengths[rows, played[rows]] = running_length[rows]
            played += ended
            running_return[ended], running_length[ended] = 0.0, 0
    finally:
        envs.close()
    return Episodes(list(seeds), returns, lengths)


def evaluate(
    policy: nn.Module, env: EnvSource, seeds: list[int],
    device: torch.device | str = "cpu", max_steps: int = 100_000,
    should_stop: Callable[[], bool] = lambda: False, episodes_per_seed: int = 1,
) -> dict[str, float]:
    """The flat summary (:func:`summarize`) of :func:`evaluate_episodes` over all episodes."""
    return evaluate_episodes(policy, env, seeds, device, max_steps, should_stop,
                             episodes_per_seed).summary()


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


def eval_device(requested: str) -> str:
    """``cpu``, ``cuda`` (must exist) or ``auto`` (``cuda`` when torch sees a GPU)."""
    if requested not in DEVICES:
        raise EvalError(f"device {requested!r}: expected one of {', '.join(DEVICES)}")
    try:
        return resolve_device(requested)
    except ConfigError:
        raise EvalError("device 'cuda': CUDA is not available here; use cpu or auto") from None


def check_comparable(checkpoints: Sequence[Checkpoint]) -> None:
    """Refuse checkpoints whose env id or spaces differ from the first one's."""
    first = checkpoints[0]
    for other in checkpoints[1:]:
        for key, what in SAME_ENV_KEYS:
            if other.manifest[key] != first.manifest[key]:
                raise EvalError(
                    f"cannot compare {other.path} with {first.path}: its {what} is "
                    f"{other.manifest[key]!r}, the first's is {first.manifest[key]!r}; "
                    "compare checkpoints of the same env")


def evaluate_loaded(loaded: LoadedPolicy, env: EnvSource, suite: SeedSuite,
                    device: str = "cpu") -> dict[str, Any]:
    """One checkpoint's result on ``suite``: ``checkpoint`` (its folder), ``global_step``,
    ``algo``, ``overall`` (:func:`summarize`) and ``per_seed`` (:meth:`Episodes.per_seed`)."""
    if loaded.normalizer is not None:
        # fastrl writes no normaliser yet; evaluating raw observations would misjudge a
        # policy trained on normalised ones, so refuse rather than guess its format.
        raise EvalError(f"{loaded.checkpoint.path}: it holds observation normalisation "
                        "constants, which this fastrl cannot apply; evaluate it with the "
                        "fastrl version that wrote it")
    episodes = evaluate_episodes(loaded.policy.to(device), env, suite.seeds, device,
                                 suite.max_steps, episodes_per_seed=suite.episodes_per_seed)
    return {"checkpoint": str(loaded.checkpoint.path),
            "global_step": loaded.checkpoint.global_step, "algo": loaded.config.algo.name,
            "overall": episodes.summary(), "per_seed": episodes.per_seed()}


def evaluate_checkpoints(paths: Sequence[str | Path],
                         overrides: Mapping[str, int | None] | None = None,
                         device: str = "cpu") -> dict[str, Any]:
    """Evaluate checkpoints (folders, or run directories: their newest valid checkpoint) on
    one seed suite and one env, both the first checkpoint's (``overrides``: SeedSuite
    fields to change; None leaves one as it is).

    Every checkpoint is verified and their envs compared before any is evaluated. Returns
    ``{"env_id", "suite": SeedSuite fields, "device", "checkpoints": [result, ...]}`` with
    one :func:`evaluate_loaded` result per path, in order.
    """
    if not paths:
        raise EvalError("no checkpoint to evaluate: give a checkpoint folder or run directory")
    checkpoints = [find_checkpoint(p) for p in paths]
    check_comparable(checkpoints)
    device = eval_device(device)
    loaded = [load_policy(c.path) for c in checkpoints]
    changes = {k: v for k, v in (overrides or {}).items() if v is not None}
    suite = replace(SeedSuite.of(loaded[0].config.log), **changes)
    env = loaded[0].plan.env
    return {"env_id": env.env_id, "suite": asdict(suite), "device": device,
            "checkpoints": [evaluate_loaded(one, env, suite, device) for one in loaded]}


def evaluate_checkpoint_to(checkpoint: str, out_path: str, parent_pid: int | None = None) -> None:
    """Evaluate one checkpoint on its config's seed suite, on the CPU with one torch thread,
    and write :func:`evaluate_checkpoints`'s JSON to ``out_path`` atomically.

    Meant as the target of a ``spawn`` process started beside a training run. With
    ``parent_pid`` (the supervisor's pid) it behaves as the run's other children: it ignores
    SIGINT/SIGTERM (the supervisor stops it with SIGKILL; the file is then simply absent)
    and dies with the supervisor.
    """
    if parent_pid is not None:
        become_child(parent_pid)
    torch.set_num_threads(1)  # beside the learner and workers, on their cores
    report = evaluate_checkpoints([checkpoint])
    write_atomically(Path(out_path), (json.dumps(report, indent=2) + "\n").encode())
