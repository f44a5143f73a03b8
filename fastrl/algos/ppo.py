"""Proximal Policy Optimization (clipped), as in CleanRL's ppo.py, on a ring batch.

The batch is time-major ``[T, N]`` (N = every env of every worker) and carries, besides the
transitions, ``bootstrap_obs`` (observation after step T-1) and ``final_obs`` (the real last
observation of episodes truncated at a step). Termination ends the return; truncation
bootstraps from the value of the final observation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from fastrl.algos.adam import Adam
from fastrl.algos.base import Algorithm, DataMode, set_lr
from fastrl.core.errors import ConfigError
from fastrl.models.families import ACTOR_CRITIC
from fastrl.models.policy import ActorCritic

if TYPE_CHECKING:
    from fastrl.config import AlgoConfig, MainConfig


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Generalised advantage estimates, ``[T, N]``.

    ``next_values[t]`` is the value of the state after step ``t`` *of the same episode*:
    ``V(obs[t+1])`` mid-episode, ``V(final_obs[t])`` where truncated, anything where
    terminated (it is multiplied by zero). The recursion is cut at every episode end.
    """
    not_term = (~terminated).to(rewards.dtype)
    not_done = (~(terminated | truncated)).to(rewards.dtype)
    deltas = rewards + gamma * next_values * not_term - values
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        last = deltas[t] + gamma * lam * not_done[t] * last
        adv[t] = last
    return adv


def explained_variance(returns: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``1 - Var(returns - values) / Var(returns)`` (NaN when the returns do not vary), a
    0-d tensor on their device."""
    var_y = returns.var()
    return torch.where(var_y > 0, 1 - (returns - values).var() / var_y, torch.nan)


class PPO:
    """Owns the optimizer; :meth:`update` trains the policy on one batch."""

    def __init__(self, policy: ActorCritic, cfg: AlgoConfig) -> None:
        self.policy = policy
        self.cfg = cfg
        self.optimizer = Adam(policy.parameters(), lr=cfg.lr, eps=1e-5)

    def state_dict(self) -> dict:
        """What continues training besides the policy's weights."""
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        self.optimizer.load_state_dict(state["optimizer"])

    @torch.no_grad()
    def next_values(self, batch: dict[str, torch.Tensor],
                    values: torch.Tensor) -> torch.Tensor:
        """The value of the state after each step of the same episode (see the module doc):
        ``values[t+1]``, the bootstrap observation's after the last step, the real final
        observation's where truncated. The value of every step's final observation is
        computed, and the truncated ones picked on the device: a data-dependent branch
        would wait for the GPU.
        """
        bootstrap = self.policy.value(batch["bootstrap_obs"])
        after = torch.cat([values[1:], bootstrap[None]])
        truncated = batch["truncated"]
        # final_obs holds stale bytes (zeros at first) where no episode was truncated: the
        # network sees the step's own observation there instead, always a valid one.
        where = truncated.view(*truncated.shape, *[1] * (batch["obs"].dim() - 2))
        final_obs = torch.where(where, batch["final_obs"], batch["obs"])
        final = self.policy.value(final_obs.flatten(0, 1)).view_as(values)
        return torch.where(truncated, final, after)

    @torch.no_grad()
    def advantages(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(advantages, returns)`` of a batch, bootstrapping as the module doc says."""
        values = batch["value"]
        adv = compute_gae(
            batch["reward"], values, self.next_values(batch, values), batch["terminated"],
            batch["truncated"], self.cfg.gamma, self.cfg.gae_lambda,
        )
        return adv, adv + values

    def update(self, batch: dict[str, torch.Tensor], lr: float) -> dict[str, torch.Tensor]:
        """Run ``update_epochs`` of minibatch PPO on ``batch``; returns the loss statistics
        as 0-d tensors on the batch's device (nothing here waits for a GPU, unless
        ``target_kl`` is set: stopping early needs the KL on the host)."""
        cfg = self.cfg
        set_lr(self.optimizer, lr)
        adv, returns = self.advantages(batch)
        obs = batch["obs"].flatten(0, 1)
        actions = batch["action"].flatten(0, 1)
        old_logp = batch["log_prob"].flatten()
        old_values = batch["value"].flatten()
        adv, returns = adv.flatten(), returns.flatten()

        n = old_logp.numel()
        mb_size = n // cfg.num_minibatches
        stats = torch.zeros(6, device=old_logp.device)  # summed over minibatches
        count = 0
        whole = slice(None)  # one minibatch: the whole batch, in any order
        for _ in range(cfg.update_epochs):
            perm = torch.randperm(n, device=old_logp.device) if cfg.num_minibatches > 1 \
                else None
            for start in range(0, n, mb_size):
                mb = whole if perm is None else perm[start : start + mb_size]
                logp, entropy, value = self.policy.evaluate(obs[mb], actions[mb])
                log_ratio = logp - old_logp[mb]
                ratio = log_ratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - log_ratio).mean()
                    clip_frac = ((ratio - 1).abs() > cfg.clip_coef).float().mean()

                mb_adv = adv[mb]
                if cfg.norm_adv:
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(
                    -mb_adv * ratio,
                    -mb_adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef),
                ).mean()

                if cfg.clip_vloss:
                    v_clipped = old_values[mb] + (value - old_values[mb]).clamp(
                        -cfg.clip_coef, cfg.clip_coef
                    )
                    v_loss = 0.5 * torch.max(
                        (value - returns[mb]) ** 2, (v_clipped - returns[mb]) ** 2
                    ).mean()
                else:
                    v_loss = 0.5 * ((value - returns[mb]) ** 2).mean()
                ent = entropy.mean()
                loss = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss

                grad_norm = self.step(loss)
                stats += torch.stack(
                    [pg_loss.detach(), v_loss.detach(), ent.detach(), approx_kl, clip_frac,
                     grad_norm]
                )
                count += 1
            if cfg.target_kl is not None and approx_kl > cfg.target_kl:
                break
        names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac", "grad_norm")
        out = dict(zip(names, stats / count))
        out["explained_variance"] = explained_variance(returns, old_values)
        return out

    def step(self, loss: torch.Tensor) -> torch.Tensor:
        """One optimizer step on ``loss``, gradients clipped at ``max_grad_norm``; returns
        the gradient norm before clipping."""
        self.optimizer.zero_grad()
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.policy.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()
        return grad_norm.detach()


def check_minibatches(cfg: MainConfig, slots: str) -> None:
    """``algo.num_minibatches`` splits the batch (``slots`` names what sets its slot count)
    into equal minibatches of at least 2 transitions."""
    mb = cfg.algo.num_minibatches
    if cfg.batch_size % mb or cfg.batch_size // mb < 2:
        raise ConfigError(
            f"config key 'algo.num_minibatches={mb}' must divide the batch "
            f"{slots}*envs_per_worker*rollout_len={cfg.batch_size} into minibatches of "
            "at least 2 transitions"
        )


ALGORITHM = Algorithm(
    name="ppo",
    summary="PPO, on-policy (the clipped surrogate; its keys sit at the top of algo)",
    data=DataMode.SYNC,
    policy=ACTOR_CRITIC,
    make_update=lambda algo, policy, obs_space, act_space, device: PPO(policy, algo),
    check_config=lambda cfg: check_minibatches(cfg, "num_workers"),
    minibatches=lambda algo: (algo.num_minibatches, algo.update_epochs),
)
