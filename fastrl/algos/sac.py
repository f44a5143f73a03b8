"""Soft Actor-Critic for Box actions on replay batches (CleanRL's sac_continuous_action.py):
twin Q critics with Polyak targets, a tanh-squashed Gaussian actor, and automatic tuning of
the entropy coefficient towards ``-|A|``. Batches are those of fastrl.algos.dqn (n-step
``reward``, ``discount``, ``done``, importance ``weights``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fastrl.algos.adam import Adam
from fastrl.algos.base import Algorithm, DataMode, RunConfig, polyak, set_lr
from fastrl.core.errors import ConfigError
from fastrl.core.settings import setting
from fastrl.models.encoders import IMAGE_ENCODERS
from fastrl.models.families import SQUASHED_GAUSSIAN
from fastrl.models.sac import SquashedGaussianActor, TwinQ


@dataclass
class SACConfig:
    """SAC: twin Q, tanh-squashed Gaussian actor, automatic entropy tuning."""

    q_lr: float = setting(1e-3, "critic learning rate (the actor uses algo.lr)", gt=0)
    tau: float = setting(0.005, "Polyak factor of the target critics", gt=0, le=1)
    autotune: bool = setting(True, "tune the entropy coefficient towards target_entropy")
    alpha: float = setting(0.2, "entropy coefficient (its start value when autotune)", gt=0)
    target_entropy: float | None = setting(None, "entropy target (null: -action dimensions)")


class SAC:
    """Owns the critics, their targets, the entropy coefficient and the optimizers;
    :meth:`update` takes one critic, actor and temperature step."""

    def __init__(self, actor: SquashedGaussianActor, critic: TwinQ, cfg: Any) -> None:
        sac = cfg.sac
        self.actor, self.critic, self.cfg = actor, critic, cfg
        self.target = copy.deepcopy(critic).requires_grad_(False)
        self.actor_params = list(actor.parameters())
        self.actor_opt = Adam(self.actor_params, lr=cfg.lr)
        self.critic_opt = Adam(critic.parameters(), lr=sac.q_lr)
        device = next(actor.parameters()).device
        self.log_alpha = torch.tensor(float(np.log(sac.alpha)), device=device,
                                      requires_grad=sac.autotune)
        self.alpha_opt = Adam([self.log_alpha], lr=sac.q_lr)
        n_act = int(np.prod(actor.act_shape))
        self.target_entropy = -float(n_act) if sac.target_entropy is None \
            else sac.target_entropy

    def _flat(self, action: torch.Tensor) -> torch.Tensor:
        return action.reshape(action.shape[0], -1).float()

    def update(self, batch: dict[str, torch.Tensor]
               ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """One step of each loss; returns the statistics and the mean absolute TD error of
        the two critics (new priorities for prioritized replay)."""
        alpha = self.log_alpha.exp().detach()
        with torch.no_grad():
            next_action, next_logp = self.actor.sample(batch["next_obs"])
            q1_next, q2_next = self.target(batch["next_obs"], next_action)
            soft_next = torch.min(q1_next, q2_next) - alpha * next_logp
            y = batch["reward"] + batch["discount"] * (1 - batch["done"]) * soft_next
        q1, q2 = self.critic(batch["obs"], self._flat(batch["action"]))
        w = batch["weights"]
        q_loss = 0.5 * (w * ((q1 - y) ** 2 + (q2 - y) ** 2)).mean()
        self.critic_opt.zero_grad()
        q_loss.backward()
        self.critic_opt.step()

        action, logp = self.actor.sample(batch["obs"])
        q1_pi, q2_pi = self.critic(batch["obs"], action)
        actor_loss = (alpha * logp - torch.min(q1_pi, q2_pi)).mean()
        self.actor_opt.zero_grad()
        # through the critics to the actions, but not into the critics' weights: their
        # gradients would cost a third of this backward, for nothing
        actor_loss.backward(inputs=self.actor_params)
        self.actor_opt.step()

        if self.cfg.sac.autotune:
            alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
            self.alpha_opt.zero_grad()
            alpha_loss.backward()
            self.alpha_opt.step()
        polyak(self.target, self.critic, self.cfg.sac.tau)

        td_abs = 0.5 * ((q1 - y).abs() + (q2 - y).abs()).detach()
        names = ("q_loss", "actor_loss", "alpha", "entropy", "q_mean")
        values = torch.stack([q_loss.detach(), actor_loss.detach(), alpha,
                              -logp.detach().mean(), q1.detach().mean()])
        return dict(zip(names, values)), td_abs

    def state_dict(self) -> dict:
        """What continues training besides the actor's weights."""
        return {"critic": self.critic.state_dict(), "target": self.target.state_dict(),
                "log_alpha": self.log_alpha.detach().clone(),
                "actor_opt": self.actor_opt.state_dict(),
                "critic_opt": self.critic_opt.state_dict(),
                "alpha_opt": self.alpha_opt.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        self.critic.load_state_dict(state["critic"])
        self.target.load_state_dict(state["target"])
        if self.cfg.sac.autotune:  # (a fixed alpha is the resumed config's)
            with torch.no_grad():
                self.log_alpha.copy_(state["log_alpha"])
        for key in ("actor_opt", "critic_opt", "alpha_opt"):
            getattr(self, key).load_state_dict(state[key])
        # a resumed config's learning rates, not the saved ones
        set_lr(self.actor_opt, self.cfg.lr)
        set_lr(self.critic_opt, self.cfg.sac.q_lr)
        set_lr(self.alpha_opt, self.cfg.sac.q_lr)


def check_config(cfg: RunConfig) -> None:
    """Refuse an encoder SAC's networks do not have: they read flat observations."""
    if cfg.algo.encoder in IMAGE_ENCODERS:
        raise ConfigError(f"config key 'algo.encoder={cfg.algo.encoder}' does not apply to "
                          "algo.name=sac, whose networks read flat observations (accepted: "
                          "auto, flat)")


ALGORITHM = Algorithm(
    name="sac",
    summary="SAC from a replay buffer (bounded Box actions)",
    data=DataMode.REPLAY,
    policy=SQUASHED_GAUSSIAN,
    # the critics are made here, on the learner's device: workers never need them
    make_update=lambda algo, policy, obs_space, act_space, device: SAC(
        policy, TwinQ(obs_space, act_space, algo.hidden_sizes).to(device), algo),
    section=SACConfig,
    check_config=check_config,
    actions="policy samples (uniformly random until the first update)",
)
