"""What an algorithm plug-in declares, and the update interfaces the learner calls.

Every algorithm is one module of :mod:`fastrl.algos` holding an ``ALGORITHM =
Algorithm(...)`` record; :mod:`fastrl.algos.registry` finds them. The record says, in one
place, everything the rest of fastrl needs to know about the algorithm: its config section,
its policy family (built-in network and contract), how workers act, its data mode (which
fixes when workers need new weights, how the learner picks a batch and what it stages),
config rules of its own and its lines in ``python -m fastrl.describe``. No other module
compares algorithm names.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Any, Protocol

import gymnasium as gym
import torch
from torch import nn

from fastrl.algos.adam import Adam
from fastrl.core.settings import setting
from fastrl.envs.source import EnvConfig
from fastrl.models.actors import Actor, policy_actor
from fastrl.models.base import PolicyFamily
from fastrl.models.numpy_actor import numpy_actor


class RunConfig(Protocol):
    """The run's config as a plug-in's rules read it: fastrl.config.RunConfig, which is
    assembled above this layer from the plug-ins' sections, so plug-ins name it by what
    they read. ``algo`` is fastrl.config.AlgoConfig: the keys every algorithm may read
    (fastrl.config.AlgoSettings) and one section per plug-in (``algo.<name>``,
    ``algo.replay``); ``infra`` is fastrl.config.InfraConfig."""

    env: EnvConfig
    algo: Any
    infra: Any
    seed: int

    @property
    def batch_slots(self) -> int:
        """Ring slots per on-policy update."""


class DataMode(enum.Enum):
    """How slots travel from the workers to the learner's updates (the value is the word
    ``describe`` uses)."""

    #: Slot k is collected with the weights of update k - max_policy_lag; an update trains
    #: on one slot from every worker (ppo, a2c).
    SYNC = "on-policy"
    #: Workers never wait for new weights; an update trains on the algorithm's
    #: ``batch_slots`` slots from whichever workers have one ready, taken in turns, dropping
    #: those past the lag bound (appo).
    ASYNC = "asynchronous"
    #: Workers never wait for new weights; slots feed a replay buffer that updates sample,
    #: paced by a samples-per-insert limiter (``algo.replay``; dqn, sac).
    REPLAY = "off-policy"
    #: Nothing trains: the learner releases every slot unread (none).
    DRAIN = "drain"

    @property
    def on_policy(self) -> bool:
        """Updates train on ring slots as they come (staged batches)."""
        return self in (DataMode.SYNC, DataMode.ASYNC)


class OnPolicyUpdate(Protocol):
    """The update of a SYNC or ASYNC algorithm."""

    def update(self, batch: dict[str, torch.Tensor], lr: float,
               step: int) -> dict[str, torch.Tensor]:
        """Train on one time-major batch of slots at learning rate ``lr``, the run at env
        step ``step`` (the schedules of :func:`annealed`); return 0-d statistics tensors
        (left on the device)."""

    def state_dict(self) -> dict: ...  # noqa: D102 - what continues training (optimizers)

    def load_state_dict(self, state: dict) -> None: ...  # noqa: D102


class ReplayUpdate(Protocol):
    """The update of a REPLAY algorithm."""

    def update(self, batch: dict[str, torch.Tensor]
               ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """One gradient step on a sampled batch; return the statistics and the absolute TD
        errors (the new priorities of prioritized replay)."""

    def state_dict(self) -> dict: ...  # noqa: D102 - what continues training

    def load_state_dict(self, state: dict) -> None: ...  # noqa: D102


#: ``make_update(algo_config, policy, obs_space, act_space, device)``
UpdateFactory = Callable[[Any, nn.Module, gym.Space, gym.Space, torch.device],
                         OnPolicyUpdate | ReplayUpdate]


def act_with_policy(policy: nn.Module, act_space: gym.Space, seed: int,
                    inference: str) -> Actor:
    """The default worker-side actor: the policy's own ``act`` (its samples), in numpy
    where ``inference`` is ``"numpy"`` and the policy is the built-in MLP
    (fastrl.models.numpy_actor), else through torch."""
    actor = numpy_actor(policy) if inference == "numpy" else None
    return actor if actor is not None else policy_actor(policy)


@dataclass(frozen=True)
class Algorithm:
    """One algorithm plug-in (see the module documentation)."""

    name: str
    #: one line for the config reference and ``describe``
    summary: str
    data: DataMode
    policy: PolicyFamily
    #: the learner side; None for DRAIN
    make_update: UpdateFactory | None = None
    #: the dataclass of the config section ``algo.<name>``, if it has one
    section: type | None = None
    #: ``infra.max_policy_lag`` when unset (SYNC and ASYNC)
    default_max_policy_lag: int = 0
    #: ring slots per on-policy update (SYNC: one from every worker)
    batch_slots: Callable[[RunConfig], int] = lambda cfg: cfg.infra.num_workers
    #: the worker-side actor: ``make_actor(policy, act_space, seed, infra.worker_inference)``
    make_actor: Callable[[nn.Module, gym.Space, int, str], Actor] = act_with_policy
    #: called before every slot a worker fills: ``schedule(actor, cfg, worker, steps)``
    #: with the run's env steps so far (DQN's epsilon)
    schedule: Callable[[Any, RunConfig, int, int], None] | None = None
    #: how ``describe`` words the workers' actions
    actions: str = "policy samples"
    #: rules of its own on the whole config: raise ConfigError
    check_config: Callable[[RunConfig], None] | None = None
    #: (minibatches, epochs) of one on-policy update, for ``describe``
    minibatches: Callable[[Any], tuple[int, int]] | None = None

    @property
    def trains(self) -> bool:
        """False for DRAIN: no update, no checkpoint, workers never wait for weights."""
        return self.data is not DataMode.DRAIN

    def weights_needed(self, seq: int, max_lag: int) -> int:
        """The oldest weights version slot ``seq`` may be collected with: SYNC's slot k
        waits for the weights of update k - max_lag; the other modes never wait (their
        workers act with the newest weights they have, any version from 0)."""
        return max(0, seq - max_lag) if self.data is DataMode.SYNC else 0


@dataclass
class ReplayConfig:
    """Off-policy data path (the REPLAY algorithms: dqn, sac): replay buffer and the
    samples-per-insert limiter."""

    capacity: int = setting(100_000, "transitions the replay buffer holds", gt=0)
    batch_size: int = setting(128, "transitions per gradient update", gt=0)
    prioritized: bool = setting(False, "prioritized replay (sum tree) instead of uniform")
    alpha: float = setting(0.6, "priority exponent: priority = (|td| + eps) ** alpha", ge=0)
    beta: float = setting(0.4, "importance-sampling exponent at the start, annealed linearly "
                          "to 1 over algo.total_steps", ge=0, le=1)
    eps: float = setting(1e-6, "added to |td| so that no priority is 0", gt=0)
    n_step: int = setting(1, "n-step returns (cut at episode ends)", gt=0)
    learning_starts: int = setting(10_000, "transitions collected before the first update",
                                   ge=0)
    updates_per_step: float = setting(
        0.25, "update-to-data ratio: gradient updates per env step collected; the learner "
        "samples batch_size * updates_per_step transitions per transition inserted", gt=0)
    max_ahead_steps: int = setting(
        1024, "how far (env steps) collection may run ahead of that ratio, or training behind "
        "it, before one side waits for the other", gt=0)


def changed_from_default(algo: Any, names: Iterable[str]) -> list[str]:
    """Those of the fields ``names`` of the ``algo`` config section (RunConfig.algo) set to
    other than their default (an algorithm refuses the keys it would ignore)."""
    defaults = {f.name: f.default for f in fields(algo)}
    return [name for name in names if getattr(algo, name) != defaults[name]]


def annealed(value: float, anneal: bool, step: int, total_steps: int) -> float:
    """``value`` at env step ``step`` of a run of ``total_steps``: with ``anneal``, decayed
    linearly to 0 over the run (``algo.anneal_lr``, ``algo.anneal_clip``), else as it is."""
    return value * (1 - step / total_steps) if anneal else value


def set_lr(optimizer: Adam, lr: float) -> None:
    """Set the learning rate of every parameter group."""
    for group in optimizer.param_groups:
        group["lr"] = lr


def polyak(target: nn.Module, online: nn.Module, tau: float) -> None:
    """``target <- tau * online + (1 - tau) * target`` (tau = 1 copies)."""
    with torch.no_grad():
        for t, o in zip(target.parameters(), online.parameters()):
            t.lerp_(o, tau)
