"""A checkpoint's policy, loaded with the env and config it trained on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fastrl.checkpoint import Checkpoint, CheckpointError, find_checkpoint
from fastrl.config import MainConfig, load_config
from fastrl.models.policy import param_shapes
from fastrl.plan import RunPlan, plan_run
from fastrl.population.policy import PopulationPolicy, member_results
from fastrl.resume import check_resumable


@dataclass
class LoadedPolicy:
    """A checkpoint's policy, ready to act, with what it was trained on."""

    checkpoint: Checkpoint
    config: MainConfig
    plan: RunPlan
    policy: torch.nn.Module  # on the CPU, in eval mode (any normaliser inside it)
    member: int | None = None  # the population member loaded, where one was chosen


def load_policy(path: Checkpoint | Path | str, env: Any = None,
                policy: Any = None, member: str | None = None) -> LoadedPolicy:
    """Load the policy of a checkpoint folder or a run directory's newest checkpoint (or of
    a :class:`Checkpoint` already verified).

    The env is rebuilt from the checkpoint's config (``env.id``, or the factory in
    ``env.fn`` / ``env.vector_fn``) unless ``env`` (an
    :class:`~fastrl.envs.source.EnvSource`) is given; likewise ``policy`` for a user
    policy that ``algo.policy`` does not name. Its spaces must be those it trained on.
    ``member`` (a population's checkpoint): load only that member, ``"<k>"`` or
    ``"best"`` (:func:`chosen_member`), with its own config.
    """
    ckpt = path if isinstance(path, Checkpoint) else find_checkpoint(path)[0]
    cfg = load_config(ckpt.path / "config.yaml", saved=True)
    plan = plan_run(cfg, env, policy)
    check_resumable(ckpt, cfg.env.id, plan.obs_space, plan.act_space,
                    param_shapes(plan.policy()), cfg.algo.name, ckpt.manifest.get("replay"))
    state = torch.load(ckpt.path / "learner.pt", map_location="cpu", weights_only=True)
    model = plan.policy()
    model.load_state_dict(state["model"])
    k = None
    if member is not None:
        k = chosen_member(model, member, state.get("last_eval"))
        cfg, model = plan.population.configs[k], model.member(k)
    model.eval()
    return LoadedPolicy(ckpt, cfg, plan, model, k)


def chosen_member(model: torch.nn.Module, member: str, last_eval: dict | None) -> int:
    """The index of population member ``member`` of ``model``: ``"<k>"``, or ``"best"``,
    the member whose mean return was highest in ``last_eval`` (the checkpoint's last
    evaluation)."""
    if not isinstance(model, PopulationPolicy):
        raise CheckpointError(f"member {member!r}: this checkpoint holds one policy, not a "
                              "population (population.size=1)")
    size = len(model.members)
    accepted = f"a member 0..{size - 1}, or best"
    if member == "best":
        evaluated = member_results(last_eval or {})
        if len(evaluated) != size:
            raise CheckpointError("member 'best': the checkpoint holds no evaluation of its "
                                  f"members to rank them by; name {accepted[2:]}")
        return int(np.argmax([m["return_mean"] for m in evaluated]))
    if not member.isdigit() or int(member) >= size:
        raise CheckpointError(f"member {member!r}: this population has {accepted}")
    return int(member)
