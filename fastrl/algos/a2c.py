"""Advantage actor-critic (A2C, Mnih et al. 2016, synchronous as in OpenAI Baselines and
Stable-Baselines3): one gradient step per batch on the plain policy gradient, no ratio,
no clipping, no minibatches. Advantages and bootstrapping are PPO's (GAE with
``algo.gae_lambda``; 1.0 gives the n-step returns of the paper), and so are the data path
(one slot from every worker, collected with the newest weights) and the network.
"""

from __future__ import annotations

import torch

from fastrl.algos.base import Algorithm, DataMode, RunConfig, changed_from_default, set_lr
from fastrl.algos.ppo import PPO, explained_variance, masked_mean, normalized, step_weights
from fastrl.core.errors import ConfigError
from fastrl.models.families import ACTOR_CRITIC

#: PPO's keys that a2c has no use for: it takes one step on the whole batch, unclipped.
UNUSED = ("update_epochs", "num_minibatches", "clip_coef", "anneal_clip", "clip_vloss",
          "target_kl")
#: the statistics of an update, besides ``explained_variance``
STAT_NAMES = ("policy_loss", "value_loss", "entropy", "grad_norm")


class A2C(PPO):
    """PPO's optimizer and advantages, with A2C's single unclipped step per batch."""

    def update(self, batch: dict[str, torch.Tensor], lr: float,
               step: int) -> dict[str, torch.Tensor]:
        """One gradient step of ``-adv * log_prob + vf_coef * value loss - ent_coef *
        entropy`` over the whole batch (unclipped: ``step`` changes nothing); returns the
        loss statistics as 0-d tensors on the batch's device."""
        cfg = self.cfg
        set_lr(self.optimizer, lr)
        adv, returns = (x.flatten() for x in self.advantages(batch))
        logp, entropy, value = (x.flatten() for x in self.evaluate_batch(batch))
        w = step_weights(batch)
        w = None if w is None else w.flatten()
        if cfg.norm_adv:
            adv = normalized(adv, w)
        pg_loss = masked_mean(-(adv * logp), w)
        v_loss = 0.5 * masked_mean((value - returns) ** 2, w)
        ent = masked_mean(entropy, w)
        grad_norm = self.step(pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss)
        return {"policy_loss": pg_loss.detach(), "value_loss": v_loss.detach(),
                "entropy": ent.detach(), "grad_norm": grad_norm,
                "explained_variance": explained_variance(returns, batch["value"].flatten(),
                                                         w)}


def check_config(cfg: RunConfig) -> None:
    """Refuse PPO's keys that a2c would silently ignore."""
    changed = changed_from_default(cfg.algo, UNUSED)
    if changed:
        raise ConfigError(f"config key 'algo.{changed[0]}={getattr(cfg.algo, changed[0])}' "
                          "does not apply to algo.name=a2c, which takes one unclipped step "
                          f"per batch (it ignores {', '.join('algo.' + k for k in UNUSED)})")


ALGORITHM = Algorithm(
    name="a2c",
    summary="advantage actor-critic, on-policy (one unclipped gradient step per batch)",
    data=DataMode.SYNC,
    policy=ACTOR_CRITIC,
    make_update=lambda algo, policy, obs_space, act_space, device: A2C(policy, algo),
    check_config=check_config,
    minibatches=lambda algo: (1, 1),
)
