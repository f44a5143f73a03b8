"""Evaluating checkpoints on one seed suite: what ``python -m fastrl.eval`` and the
checkpoint evaluations of a run (``log.eval_on_checkpoint``) compute."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from fastrl.checkpoint import Checkpoint, find_checkpoint
from fastrl.config import ConfigError
from fastrl.core.files import write_atomically
from fastrl.envs.source import EnvSource
from fastrl.eval.harness import EvalError, SeedSuite, evaluate_episodes, population_summary
from fastrl.eval.policy import LoadedPolicy, load_policy
from fastrl.plan import resolve_device
from fastrl.population.policy import PopulationPolicy

DEVICES = ("cpu", "cuda", "auto")
# What must match for two checkpoints to be evaluated on one env: manifest key, its name.
SAME_ENV_KEYS = (("env_id", "env.id"), ("observation_space", "observation space"),
                 ("action_space", "action space"))


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
    ``algo``, ``summary`` (flat floats, :func:`~fastrl.eval.harness.summarize`) and
    ``per_seed`` (:meth:`~fastrl.eval.harness.Episodes.per_seed`). A population's (every
    member): each member evaluated, ``summary`` theirs together
    (fastrl.eval.harness.population_summary), ``per_seed`` each member's rows, with its
    ``member``."""
    policy = loaded.policy.to(device)
    population = isinstance(policy, PopulationPolicy)
    runs = [evaluate_episodes(member, env, suite.seeds, device, suite.max_steps,
                              episodes_per_seed=suite.episodes_per_seed,
                              selfplay=loaded.config.selfplay)
            for member in (policy.members if population else [policy])]
    result = {"checkpoint": str(loaded.checkpoint.path),
              "global_step": loaded.checkpoint.global_step, "algo": loaded.config.algo.name}
    if not population:
        return {**result, "summary": runs[0].summary(), "per_seed": runs[0].per_seed()}
    return {**result, "summary": population_summary([run.summary() for run in runs]),
            "per_seed": [{"member": k, **entry} for k, run in enumerate(runs)
                         for entry in run.per_seed()]}


def evaluate_checkpoints(paths: Sequence[str | Path],
                         overrides: Mapping[str, int | None] | None = None,
                         device: str = "cpu", env: EnvSource | None = None,
                         policy: Any = None, member: str | None = None) -> dict[str, Any]:
    """Evaluate checkpoints (folders, or run directories: their newest valid checkpoint) on
    one seed suite and one env, both the first checkpoint's (``overrides``: SeedSuite
    fields to change; None leaves one as it is).

    Every checkpoint is verified and their envs compared before any is evaluated. Returns
    ``{"env_id", "suite": SeedSuite fields, "device", "skipped", "checkpoints": [result,
    ...]}`` with one :func:`evaluate_loaded` result per path, in order; ``skipped`` has a
    line per corrupt checkpoint of a run directory newer than the one evaluated. ``env``
    and ``policy`` stand in for an env factory or policy the checkpoints' config cannot
    name, and ``member`` picks one member of a population's checkpoints (see
    :func:`~fastrl.eval.policy.load_policy`).
    """
    if not paths:
        raise EvalError("no checkpoint to evaluate: give a checkpoint folder or run directory")
    found = [find_checkpoint(p) for p in paths]
    checkpoints = [ckpt for ckpt, _ in found]
    check_comparable(checkpoints)
    device = eval_device(device)
    loaded = [load_policy(c, env, policy, member) for c in checkpoints]  # (verified above)
    changes = {k: v for k, v in (overrides or {}).items() if v is not None}
    suite = replace(SeedSuite.of(loaded[0].config.log), **changes)
    env = loaded[0].plan.env
    return {"env_id": env.env_id, "suite": asdict(suite), "device": device,
            "skipped": [note for _, notes in found for note in notes],
            "checkpoints": [evaluate_loaded(one, env, suite, device) for one in loaded]}


def checkpoint_report(report: dict[str, Any]) -> dict[str, Any]:
    """The document of a one-checkpoint :func:`evaluate_checkpoints` report: its
    ``env_id``, ``suite`` and ``device`` beside that checkpoint's result fields."""
    (result,) = report["checkpoints"]
    return {**{k: v for k, v in report.items() if k != "checkpoints"}, **result}


def evaluate_checkpoint_to(checkpoint: str, out_path: str, env: EnvSource | None = None,
                           policy: Any = None) -> None:
    """Evaluate one checkpoint on its config's seed suite, on the CPU with one torch thread,
    and write its :func:`checkpoint_report` as JSON to ``out_path`` atomically.

    Picklable: the target of the ``spawn`` process that evaluates a checkpoint written
    during training (``log.eval_on_checkpoint``), beside the learner and workers.
    """
    torch.set_num_threads(1)  # beside the learner and workers, on their cores
    report = checkpoint_report(evaluate_checkpoints([checkpoint], env=env, policy=policy))
    write_atomically(Path(out_path), (json.dumps(report, indent=2) + "\n").encode())
