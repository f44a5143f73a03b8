"""A checkpoint's policy, loaded with the env and config it trained on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fastrl.checkpoint import Checkpoint, find_checkpoint
from fastrl.config import MainConfig, load_config
from fastrl.models.policy import param_shapes
from fastrl.plan import RunPlan, plan_run
from fastrl.resume import check_resumable


@dataclass
class LoadedPolicy:
    """A checkpoint's policy, ready to act, with what it was trained on."""

    checkpoint: Checkpoint
    config: MainConfig
    plan: RunPlan
    policy: torch.nn.Module  # on the CPU, in eval mode (any normaliser inside it)


def load_policy(path: Checkpoint | Path | str, env: Any = None,
                policy: Any = None) -> LoadedPolicy:
    """Load the policy of a checkpoint folder or a run directory's newest checkpoint (or of
    a :class:`Checkpoint` already verified).

    The env is rebuilt from the checkpoint's config (``env.id``, or the factory in
    ``env.fn`` / ``env.vector_fn``) unless ``env`` (an
    :class:`~fastrl.envs.source.EnvSource`) is given; likewise ``policy`` for a user
    policy that ``algo.policy`` does not name. Its spaces must be those it trained on.
    """
    ckpt = path if isinstance(path, Checkpoint) else find_checkpoint(path)[0]
    cfg = load_config(ckpt.path / "config.yaml", saved=True)
    plan = plan_run(cfg, env, policy)
    check_resumable(ckpt, cfg.env.id, plan.obs_space, plan.act_space,
                    param_shapes(plan.policy()), cfg.algo.name, ckpt.manifest.get("replay"))
    state = torch.load(ckpt.path / "learner.pt", map_location="cpu", weights_only=True)
    model = plan.policy()
    model.load_state_dict(state["model"])
    model.eval()
    return LoadedPolicy(ckpt, cfg, plan, model)
