"""What a config means concretely: env spaces, ring layout, segment sizes, learner device.

Computed once by the supervisor and handed to every child, so that all processes agree on
the bytes of every slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from fastrl.config import AlgoConfig, ConfigError, MainConfig
from fastrl.envs.contract import check_env
from fastrl.envs.source import EnvSource, env_source
from fastrl.memory.control import RunControl
from fastrl.memory.layout import SlotLayout, trajectory_layout
from fastrl.memory.ring import Ring
from fastrl.memory.segments import check_shm_space
from fastrl.memory.weights import SharedWeights
from fastrl.models.base import build_policy

SHM_KNOBS = "infra.ring_slots, infra.rollout_len, infra.envs_per_worker or infra.num_workers"


@dataclass(frozen=True)
class RunPlan:
    """The resolved shape of a run; picklable for ``spawn``."""

    cfg: MainConfig
    env: EnvSource
    obs_space: gym.Space
    act_space: gym.Space
    layout: SlotLayout
    num_params: int
    device: str
    policy_spec: Any = None  # a user's policy (class, import string or module), see make_policy

    @property
    def ring_bytes(self) -> int:
        """Bytes of one worker's ring segment."""
        return Ring.nbytes(self.layout, self.cfg.infra.ring_slots)

    @property
    def weights_bytes(self) -> int:
        """Bytes of the weights segment."""
        return SharedWeights.nbytes(self.num_params)

    def shm_bytes(self) -> dict[str, int]:
        """Shared memory the run needs, by segment kind."""
        w = self.cfg.infra.num_workers
        return {f"{w} rings": w * self.ring_bytes, "weights": self.weights_bytes,
                "control": RunControl.nbytes()}

    def check_shared_memory(self) -> None:
        """Raise :class:`~fastrl.memory.segments.SharedMemoryFull` unless /dev/shm has room
        for :meth:`shm_bytes` now (every runtime but serial, which keeps the rings in its
        own memory). The supervisor checks again just before it creates the segments."""
        if self.cfg.infra.runtime != "serial":
            check_shm_space(self.shm_bytes(), knobs=SHM_KNOBS)

    @property
    def trains(self) -> bool:
        """False for an algorithm that does not train (none): workers never wait for new
        weights."""
        return self.cfg.algo.algorithm.trains

    def policy(self) -> nn.Module:
        """A freshly initialised policy of this run's architecture (on the CPU)."""
        return make_policy(self.cfg.algo, self.obs_space, self.act_space, self.policy_spec)


def make_policy(algo: AlgoConfig, obs_space: gym.Space, act_space: gym.Space,
                spec: Any = None) -> nn.Module:
    """The network workers act with and whose weights the learner publishes: the user's
    policy ``spec`` (see :func:`fastrl.models.base.build_policy`; checked against the
    algorithm's policy family, :class:`~fastrl.models.base.PolicyContractError` if it does
    not fit), else the family's built-in network (fastrl.models.families)."""
    family = algo.algorithm.policy
    if spec is not None:
        return build_policy(spec, family, algo, obs_space, act_space)
    return family.build(obs_space, act_space, algo)


def resolve_device(requested: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; ``cuda`` must exist."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ConfigError("config key 'infra.device=cuda': CUDA is not available here; "
                          "use auto or cpu")
    return requested


def plan_run(cfg: MainConfig, env: EnvSource | None = None, policy: Any = None) -> RunPlan:
    """Probe the env's spaces once and derive everything the processes must agree on.

    ``env`` is where the envs come from (default: the config's ``env`` section); ``policy``
    a user's policy (default: ``algo.policy``, else the built-in network). The env contract
    and the policy's are checked here, before any process starts.
    """
    env = env or env_source(cfg.env)
    check_env(env, cfg.seed)
    probe = env.make([cfg.seed])
    obs_space, act_space = probe.observation_space, probe.action_space
    probe.close()
    infra = cfg.infra
    layout = trajectory_layout(obs_space, act_space, infra.rollout_len, infra.envs_per_worker)
    policy = policy if policy is not None else (cfg.algo.policy or None)
    num_params = sum(p.numel() for p in
                     make_policy(cfg.algo, obs_space, act_space, policy).parameters())
    return RunPlan(cfg, env, obs_space, act_space, layout, num_params,
                   resolve_device(infra.device), policy)
