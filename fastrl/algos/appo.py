"""Asynchronous PPO (Sample Factory's APPO): PPO's clipped losses on slots collected by
policies up to ``infra.max_policy_lag`` versions old, with V-trace targets.

Workers never wait for new weights, so a batch mixes behaviour policies. Before the
minibatch epochs, the current network scores the batch once: V-trace (Espeholt et al.
2018) turns the behaviour's rewards into value targets ``vs`` and policy-gradient
advantages for the current policy, with the importance ratios clipped at ``rho_bar`` and
``c_bar``. The minibatch epochs are PPO's, with the ratio taken against the behaviour
policy's log-probabilities (``log_prob`` in the slot), as Sample Factory does.
"""

from __future__ import annotations

import torch

from fastrl.algos.ppo import PPO
from fastrl.algos.vtrace import vtrace


class APPO(PPO):
    """PPO whose advantages and value targets are V-trace's."""

    @torch.no_grad()
    def advantages(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pg_advantages, vs)`` under the current network (see the module doc)."""
        cfg, appo = self.cfg, self.cfg.appo
        reward = batch["reward"]
        target_logp, _, values = self.policy.evaluate(batch["obs"].flatten(0, 1),
                                                      batch["action"].flatten(0, 1))
        target_logp, values = target_logp.view_as(reward), values.view_as(reward)
        vs, pg_adv = vtrace(
            batch["log_prob"], target_logp, reward, values, self.next_values(batch, values),
            batch["terminated"], batch["truncated"], cfg.gamma, rho_bar=appo.rho_bar,
            c_bar=appo.c_bar, lam=appo.vtrace_lambda,
        )
        return pg_adv, vs
