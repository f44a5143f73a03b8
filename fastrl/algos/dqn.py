"""DQN on replay batches: double Q, target network (hard or Polyak), n-step targets, and
importance weights for prioritized replay (CleanRL's dqn.py, plus what Rainbow kept).

A batch holds ``obs, action, reward, next_obs, done, discount, weights``: ``reward`` is the
n-step discounted return, ``discount`` is ``gamma ** k`` for the ``k`` rewards summed, and
``done`` is 1 where the window ended in a termination (no bootstrap). Truncated windows
bootstrap from their real final observation, which the replay buffer stored as ``next_obs``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from fastrl.algos.adam import Adam
from fastrl.algos.base import Algorithm, DataMode, RunConfig, polyak, set_lr
from fastrl.core.settings import setting
from fastrl.models.actors import Actor
from fastrl.models.families import Q_NETWORK
from fastrl.models.masks import uniform_legal
from fastrl.models.qnet import QNetwork


@dataclass
class DQNConfig:
    """DQN: double Q, target network, dueling head, per-worker epsilon (Ape-X)."""

    double: bool = setting(True, "double Q-learning: the online net picks the next action")
    dueling: bool = setting(False, "dueling head: Q = V + A - mean(A)")
    target_tau: float = setting(1.0, "target update: 1.0 copies the online net (hard), < 1 moves "
                                "the target that fraction towards it (Polyak)", gt=0, le=1)
    target_every: int = setting(500, "gradient updates between target updates (1 with Polyak)",
                                gt=0)
    eps_start: float = setting(1.0, "every worker's epsilon at step 0", ge=0, le=1)
    eps_base: float = setting(0.4, "Ape-X: worker i of N ends at eps_base ** (1 + eps_alpha * i / "
                              "(N - 1))", ge=0, le=1)
    eps_alpha: float = setting(7.0, "Ape-X spread of the final epsilons across workers", ge=0)
    exploration_fraction: float = setting(
        0.5, "fraction of algo.total_steps over which epsilon decays linearly", gt=0, le=1)



class DQN:
    """Owns the target network and the optimizer; :meth:`update` takes one gradient step."""

    def __init__(self, q: QNetwork, cfg: Any) -> None:
        self.q = q
        self.cfg = cfg
        self.target = copy.deepcopy(q).requires_grad_(False)
        self.optimizer = Adam(q.parameters(), lr=cfg.lr)
        self.updates = 0

    @torch.no_grad()
    def targets(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``r + discount * (1 - done) * Q_target(s', a*)``; ``a*`` from the online net when
        double Q-learning, from the target net otherwise."""
        next_q = self.target(batch["next_obs"])
        if self.cfg.dqn.double:
            best = self.q(batch["next_obs"]).argmax(-1, keepdim=True)
            next_value = next_q.gather(-1, best).squeeze(-1)
        else:
            next_value = next_q.max(-1).values
        return batch["reward"] + batch["discount"] * (1 - batch["done"]) * next_value

    def update(self, batch: dict[str, torch.Tensor]
               ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """One gradient step on an importance-weighted Huber TD loss; returns the statistics
        and the absolute TD errors (new priorities for prioritized replay)."""
        cfg = self.cfg
        y = self.targets(batch)
        action = self.q.action_index(batch["action"]).unsqueeze(-1)
        q_taken = self.q(batch["obs"]).gather(-1, action).squeeze(-1)
        td = y - q_taken
        loss = (batch["weights"] * nn.functional.huber_loss(q_taken, y, reduction="none")).mean()
        self.optimizer.zero_grad()
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.q.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        self.updates += 1
        if self.updates % cfg.dqn.target_every == 0:
            polyak(self.target, self.q, cfg.dqn.target_tau)
        td_abs = td.detach().abs()
        names = ("q_loss", "q_mean", "td_abs_mean", "grad_norm")
        values = torch.stack([loss.detach(), q_taken.detach().mean(), td_abs.mean(),
                              grad_norm.detach()])
        return dict(zip(names, values)), td_abs

    def state_dict(self) -> dict:
        """What continues training besides the online network's weights."""
        return {"target": self.target.state_dict(), "optimizer": self.optimizer.state_dict(),
                "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        set_lr(self.optimizer, self.cfg.lr)  # a resumed config's lr, not the saved one
        self.updates = state["updates"]


class EpsilonGreedy(Actor):
    """DQN's actor: the Q-network's greedy actions, each env's replaced by a uniform one with
    probability :attr:`epsilon` (set by the worker as its schedule advances)."""

    def __init__(self, q: QNetwork, space: spaces.Discrete, seed: int) -> None:
        self.q, self.space = q, space
        self.rng = np.random.default_rng(seed)
        self.epsilon = 1.0

    def __call__(self, obs: np.ndarray):
        action, log_prob, value = (x.numpy() for x in self.q.act(torch.from_numpy(obs)))
        explore = self.rng.random(len(action)) < self.epsilon
        if explore.any():
            mask = getattr(self.q, "legal_actions", None)  # (a user's policy: none)
            action[explore] = self.space.start + (
                self.rng.integers(self.space.n, size=int(explore.sum())) if mask is None
                else uniform_legal(mask.numpy(obs[explore]), self.rng))
        return action, log_prob, value

    def state(self) -> dict:
        """Its random state (which envs explore, and how)."""
        return {"epsilon_rng": self.rng.bit_generator.state}

    def restore(self, state: dict) -> None:
        """Go on with a parked worker's random state (:meth:`state`), where it kept one."""
        if "epsilon_rng" in state:
            self.rng.bit_generator.state = state["epsilon_rng"]


def apex_epsilon(cfg: DQNConfig, worker: int, num_workers: int, step: int,
                 total_steps: int) -> float:
    """Worker ``worker``'s epsilon at run step ``step``: linear from ``eps_start`` to its own
    final value over ``exploration_fraction * total_steps``. The final values spread across
    workers as in Ape-X, ``eps_base ** (1 + eps_alpha * i / (N - 1))``, so that some workers
    explore while others collect near-greedy data."""
    spread = worker / (num_workers - 1) if num_workers > 1 else 0.0
    final = cfg.eps_base ** (1 + cfg.eps_alpha * spread)
    progress = min(1.0, step / (cfg.exploration_fraction * total_steps))
    return cfg.eps_start + progress * (final - cfg.eps_start)


def schedule_epsilon(actor: EpsilonGreedy, cfg: RunConfig, worker: int, steps: int) -> None:
    """Set worker ``worker``'s epsilon for the run's env step ``steps``."""
    actor.epsilon = apex_epsilon(cfg.algo.dqn, worker, cfg.infra.num_workers, steps,
                                 cfg.algo.total_steps)


ALGORITHM = Algorithm(
    name="dqn",
    summary="DQN from a replay buffer (Discrete actions)",
    data=DataMode.REPLAY,
    policy=Q_NETWORK,
    make_update=lambda algo, policy, obs_space, act_space, device: DQN(policy, algo),
    section=DQNConfig,
    make_actor=lambda policy, act_space, seed, _: EpsilonGreedy(policy, act_space, seed),
    schedule=schedule_epsilon,
    actions="epsilon-greedy (Ape-X epsilons per worker)",
)
