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

from dataclasses import dataclass

import torch

from fastrl.algos.base import Algorithm, DataMode, RunConfig, changed_from_default
from fastrl.algos.ppo import PPO, check_minibatches
from fastrl.algos.vtrace import vtrace
from fastrl.core.errors import ConfigError
from fastrl.core.settings import setting
from fastrl.models.families import ACTOR_CRITIC

MAX_POLICY_LAG = 16  # infra.max_policy_lag of appo when unset


@dataclass
class APPOConfig:
    """APPO (asynchronous PPO, Sample Factory's): workers never wait for new weights; the
    learner trains on whichever slots are ready, with V-trace targets (Espeholt et al. 2018)
    correcting for the policy lag, and PPO's clipped surrogate against the behaviour
    policy."""

    batch_slots: int | None = setting(None, "ring slots per update, taken from whichever workers "
                                      "have one ready (null: infra.num_workers)", gt=0)
    rho_bar: float = setting(1.0, "V-trace: clip of the importance ratios in the targets' "
                             "temporal differences and the policy-gradient advantages", gt=0)
    c_bar: float = setting(1.0, "V-trace: clip of the trace-cutting ratios", gt=0)
    vtrace_lambda: float = setting(1.0, "V-trace: lambda of the traces (1: the paper's)", ge=0,
                                   le=1)




class APPO(PPO):
    """PPO whose advantages and value targets are V-trace's."""

    @torch.no_grad()
    def advantages(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pg_advantages, vs)`` under the current network (see the module doc)."""
        cfg, appo = self.cfg, self.cfg.appo
        reward = batch["reward"]
        target_logp, _, values = self.evaluate_batch(batch)
        vs, pg_adv = vtrace(
            batch["log_prob"], target_logp, reward, values, self.next_values(batch, values),
            batch["terminated"], batch["truncated"], cfg.gamma, rho_bar=appo.rho_bar,
            c_bar=appo.c_bar, lam=appo.vtrace_lambda,
        )
        return pg_adv, vs


def batch_slots(cfg: RunConfig) -> int:
    """Ring slots per update: ``algo.appo.batch_slots``, or one per worker when unset."""
    slots = cfg.algo.appo.batch_slots
    return cfg.infra.num_workers if slots is None else slots


def check_config(cfg: RunConfig) -> None:
    """A batch fits the rings and splits into minibatches; GAE's lambda is not set (V-trace
    has its own)."""
    check_minibatches(cfg, "algo.appo.batch_slots")
    ring_capacity = cfg.infra.num_workers * cfg.infra.ring_slots
    if cfg.batch_slots > ring_capacity:
        raise ConfigError(
            f"config key 'algo.appo.batch_slots={cfg.batch_slots}' is more slots than the "
            f"rings hold (infra.num_workers*infra.ring_slots={ring_capacity}): the learner "
            "would wait for good; lower it or raise infra.ring_slots")
    if changed_from_default(cfg.algo, ["gae_lambda"]):
        raise ConfigError(f"config key 'algo.gae_lambda={cfg.algo.gae_lambda}' is GAE's, "
                          "which appo does not use: set algo.appo.vtrace_lambda instead")


ALGORITHM = Algorithm(
    name="appo",
    summary="asynchronous PPO with V-trace (Sample Factory's APPO)",
    data=DataMode.ASYNC,
    policy=ACTOR_CRITIC,
    make_update=lambda algo, policy, obs_space, act_space, device: APPO(policy, algo),
    section=APPOConfig,
    default_max_policy_lag=MAX_POLICY_LAG,
    batch_slots=batch_slots,
    check_config=check_config,
    minibatches=lambda algo: (algo.num_minibatches, algo.update_epochs),
)
