"""PPO and APPO updates (fastrl.algos.ppo, fastrl.algos.appo): GAE against hand-computed
values; stale final observations never reach the network in an update; update statistics
stay on the device; the update's steps and statistics are a plainly written loop's, with the
clip annealed over the run under algo.anneal_clip."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch
from gymnasium import spaces

from fastrl.algos.adam import Adam
from fastrl.algos.ppo import PPO, compute_gae
from fastrl.config import AlgoConfig, load_config
from fastrl.models.families import build_actor_critic
from fastrl.models.policy import ActorCritic

G, L = 0.5, 0.5


def t(x, dtype=torch.float32):
    """A [T, 1] tensor of ``x``."""
    return torch.tensor(x, dtype=dtype).reshape(-1, 1)


@pytest.mark.parametrize("terminated, truncated, expected", [
    # values [0.5, 1, 2]; next values: V(obs1)=1, V(final)=4 at t=1, V(bootstrap)=8
    # deltas: 1 + .5*1 - .5 = 1 | 1 + .5*4 - 1 = 2 | 1 + .5*8 - 2 = 3
    ([0, 0, 0], [0, 1, 0], [1.0 + 0.25 * 2.0, 2.0, 3.0]),   # truncated: bootstrap, cut chain
    # terminated at t=1: delta1 = 1 - 1 = 0, chain cut
    ([0, 1, 0], [0, 0, 0], [1.0, 0.0, 3.0]),
    # no episode end: A1 = 2' where delta1 uses V(obs2)=2: 1 + 1 - 1 = 1
    ([0, 0, 0], [0, 0, 0], [1.0 + 0.25 * (1.0 + 0.25 * 3.0), 1.0 + 0.25 * 3.0, 3.0]),
])
def test_gae_matches_hand_computation(terminated, truncated, expected):
    values = t([0.5, 1.0, 2.0])
    trunc = t(truncated, torch.bool)
    next_values = t([1.0, 2.0, 8.0])
    next_values[trunc] = 4.0  # V(final_obs) where truncated
    adv = compute_gae(t([1, 1, 1]), values, next_values, t(terminated, torch.bool), trunc, G, L)
    assert adv.flatten().tolist() == pytest.approx(expected)



def test_stale_final_observations_never_reach_the_network():
    # final_obs rows past an env's truncations hold stale bytes (zeros at first), which a
    # Discrete(4, start=10) network cannot one-hot: with or without a branch.
    policy = ActorCritic(spaces.Discrete(4, start=10), spaces.Discrete(2), [8])
    T, N = 4, 3
    truncated = torch.zeros(T, N, dtype=torch.bool)
    truncated[1, 0] = True
    final_obs = torch.zeros(N, 2, dtype=torch.int64)  # [N, rows]
    final_obs[0, 0] = 12
    batch = {"obs": torch.randint(10, 14, (T, N)), "action": torch.randint(0, 2, (T, N)),
             "reward": torch.ones(T, N), "terminated": torch.zeros(T, N, dtype=torch.bool),
             "truncated": truncated, "log_prob": torch.full((T, N), -0.69),
             "value": torch.zeros(T, N), "final_obs": final_obs,
             "bootstrap_obs": torch.randint(10, 14, (N,))}
    ppo = PPO(policy, AlgoConfig(num_minibatches=2))
    after = torch.zeros(T, N)
    value_after = ppo.units.value_after(batch)
    everywhere = ppo._final_values_everywhere(batch, after.clone(), value_after)
    # (equal up to rounding: a matmul over fewer rows may sum in another order)
    assert torch.allclose(everywhere, ppo._final_values_where_truncated(
        batch, after.clone(), value_after), atol=1e-6)
    assert torch.isclose(everywhere[1, 0], policy.value(torch.tensor([12]))[0], atol=1e-6)
    stats = ppo.update(batch, 1e-3, 0)
    assert torch.isfinite(stats["policy_loss"]) and torch.isfinite(stats["value_loss"])


def test_ppo_update_statistics_stay_on_the_device():
    obs_space, act_space = spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(2)
    for name in ("ppo", "appo"):
        cfg = load_config(None, [f"algo.name={name}", "algo.num_minibatches=2"]).algo
        policy = ActorCritic(obs_space, act_space, [8])
        algo = cfg.algorithm.make_update(cfg, policy, obs_space, act_space, torch.device("cpu"))
        T, N = 5, 4
        batch = {"obs": torch.rand(T, N, 3), "action": torch.randint(0, 2, (T, N)),
                 "reward": torch.ones(T, N), "terminated": torch.zeros(T, N, dtype=bool),
                 "truncated": torch.zeros(T, N, dtype=bool),
                 "log_prob": torch.full((T, N), -0.69), "value": torch.zeros(T, N),
                 "final_obs": torch.full((N, 1, 3), float("nan")),  # stale: never picked
                 "bootstrap_obs": torch.rand(N, 3)}
        stats = algo.update(batch, 1e-3, 0)
        assert all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in stats.values())
        assert all(torch.isfinite(v) for v in stats.values()), (name, stats)



def textbook_ppo(policy: ActorCritic, cfg: AlgoConfig, batch: dict, adv: torch.Tensor,
                 returns: torch.Tensor, lr: float) -> torch.Tensor:
    """CleanRL's minibatch loop, written plainly (every statistic measured on every step);
    returns the means of the statistics over the last epoch's minibatches."""
    optimizer = Adam(policy.parameters(), lr=lr, eps=1e-5)
    obs, actions = batch["obs"].flatten(0, 1), batch["action"].flatten(0, 1)
    old_logp, old_values = batch["log_prob"].flatten(), batch["value"].flatten()
    adv, returns = adv.flatten(), returns.flatten()
    n = adv.numel()
    mb_size = n // cfg.num_minibatches
    for _ in range(cfg.update_epochs):
        perm = torch.randperm(n) if cfg.num_minibatches > 1 else torch.arange(n)
        epoch_stats = []
        for start in range(0, n, mb_size):
            mb = perm[start:start + mb_size]
            logp, entropy, value = policy.evaluate(obs[mb], actions[mb])
            ratio = (logp - old_logp[mb]).exp()
            mb_adv = (adv[mb] - adv[mb].mean()) / (adv[mb].std() + 1e-8)
            pg_loss = torch.max(-mb_adv * ratio, -mb_adv * ratio.clamp(
                1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
            v_clipped = old_values[mb] + (value - old_values[mb]).clamp(-cfg.clip_coef,
                                                                       cfg.clip_coef)
            errors = (value - returns[mb]) ** 2
            if cfg.clip_vloss:
                errors = torch.max(errors, (v_clipped - returns[mb]) ** 2)
            v_loss = 0.5 * errors.mean()
            loss = pg_loss - cfg.ent_coef * entropy.mean() + cfg.vf_coef * v_loss
            optimizer.zero_grad()
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            optimizer.step()
            log_ratio = (logp - old_logp[mb]).detach()
            epoch_stats.append(torch.stack([
                pg_loss.detach(), v_loss.detach(), entropy.mean().detach(),
                ((log_ratio.exp() - 1) - log_ratio).mean(),
                ((log_ratio.exp() - 1).abs() > cfg.clip_coef).float().mean(), grad_norm]))
        if cfg.target_kl is not None and epoch_stats[-1][3] > cfg.target_kl:
            break
    return torch.stack(epoch_stats).mean(0)


@pytest.mark.parametrize("overrides", [
    dict(num_minibatches=1, ent_coef=0.0),  # the shipped CartPole config's loop
    dict(num_minibatches=4, ent_coef=0.01, clip_vloss=True),
    dict(num_minibatches=2, target_kl=1e-9),  # stops after the first epoch
])
def test_update_takes_the_textbook_steps_and_reports_the_last_epoch(overrides):
    cfg = AlgoConfig(update_epochs=3, **overrides)
    assert_update_is_textbook_ppo(cfg, step=0, textbook_cfg=cfg)


def test_anneal_clip_decays_the_clip_linearly_over_the_run():
    cfg = AlgoConfig(clip_coef=0.4, total_steps=1000, anneal_clip=True, update_epochs=3,
                     num_minibatches=2)
    ppo = PPO(ActorCritic(spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(3), [8]), cfg)
    assert [ppo.clip_coef(s) for s in (0, 250, 500, 750, 1000)] == \
        pytest.approx([0.4, 0.3, 0.2, 0.1, 0.0])
    assert PPO(ppo.policy, replace(cfg, anneal_clip=False)).clip_coef(750) == 0.4
    # the update clips the ratio and the value, and counts clip_frac, at its step's clip
    assert_update_is_textbook_ppo(cfg, step=750,
                                  textbook_cfg=replace(cfg, clip_coef=0.1, anneal_clip=False))


def assert_update_is_textbook_ppo(cfg: AlgoConfig, step: int, textbook_cfg: AlgoConfig) -> None:
    """PPO's update of ``cfg`` at env step ``step`` takes :func:`textbook_ppo`'s steps under
    ``textbook_cfg`` and reports its statistics."""
    torch.manual_seed(0)
    obs_space, act_space = spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(3)
    T, N = 8, 4
    batch = {"obs": torch.randn(T, N, 3), "action": torch.randint(0, 3, (T, N)),
             "reward": torch.randn(T, N), "terminated": torch.rand(T, N) < 0.1,
             "truncated": torch.zeros(T, N, dtype=bool), "log_prob": torch.full((T, N), -1.1),
             "value": torch.randn(T, N), "final_obs": torch.zeros(N, 1, 3),
             "bootstrap_obs": torch.randn(N, 3)}
    policy = ActorCritic(obs_space, act_space, [16])
    reference = copy.deepcopy(policy)
    adv, returns = PPO(reference, cfg).advantages(batch)

    torch.manual_seed(1)
    stats = PPO(policy, cfg).update(batch, 3e-3, step)
    torch.manual_seed(1)
    expected = textbook_ppo(reference, textbook_cfg, batch, adv, returns, 3e-3)

    for got, want in zip(policy.parameters(), reference.parameters()):
        assert torch.allclose(got, want, atol=1e-6)
    names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac", "grad_norm")
    assert torch.allclose(torch.stack([stats[k] for k in names]), expected, atol=1e-6)


@pytest.mark.parametrize("core", ["none", "lstm"])
def test_final_values_are_the_same_with_and_without_a_branch(core):
    # the CPU picks the truncated rows; a GPU computes every row and selects on the device
    torch.manual_seed(0)
    obs_space, act_space = spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(2)
    policy = build_actor_critic(obs_space, act_space, AlgoConfig(hidden_sizes=[8], core=core,
                                                                 core_size=5))
    ppo = PPO(policy, AlgoConfig())
    T, N = 6, 4
    truncated = torch.rand(T, N) < 0.3
    terminated = (torch.rand(T, N) < 0.2) & ~truncated
    rows = int(truncated.sum(0).max())
    batch = {"obs": torch.randn(T, N, 3), "final_obs": torch.randn(N, rows + 1, 3),
             "truncated": truncated, "terminated": terminated,
             "bootstrap_obs": torch.randn(N, 3), "core_state": torch.randn(N, 10)}
    value_after = ppo.units.value_after(batch)
    after = torch.randn(T, N)
    picked = ppo._final_values_where_truncated(batch, after.clone(), value_after)
    t, n = truncated.nonzero(as_tuple=True)
    row = torch.tensor([int(truncated[:i + 1, j].sum()) - 1 for i, j in zip(t, n)])
    finals = batch["final_obs"][n, row]
    if core == "none":
        expected = policy.value(finals)
    else:  # from the state after step t of env n, stepped by hand, reset after episode ends
        state, after_step = batch["core_state"].clone(), []
        for i in range(T):
            state = policy._step(policy._features(batch["obs"][i]), state)
            after_step.append(state)
            state = state * ~(truncated[i] | terminated[i])[:, None]
        expected = policy.value(finals, torch.stack(after_step)[t, n])
    assert torch.allclose(picked[t, n], expected, atol=1e-6)
    # (equal up to rounding: a matmul over fewer rows may sum in another order)
    assert torch.allclose(picked, ppo._final_values_everywhere(batch, after.clone(),
                                                               value_after), atol=1e-6)
    assert not torch.equal(picked, after)  # some rows were truncated and rewritten
    none = {**batch, "truncated": torch.zeros(T, N, dtype=torch.bool)}
    assert torch.equal(ppo._final_values_where_truncated(none, after.clone(), value_after),
                       after)


@pytest.mark.parametrize("name", ["ppo", "a2c", "appo"])
def test_padding_steps_of_a_multi_agent_batch_change_nothing(name):
    # a multi-agent env's padding (rows whose agent is gone: active False) holds anything;
    # the update must be the same whatever it holds, and differ if it counted
    torch.manual_seed(0)
    obs_space, act_space = spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(3)
    cfg = load_config(None, [f"algo.name={name}"] +
                      (["algo.num_minibatches=2"] if name != "a2c" else [])).algo
    T, N = 8, 4
    active = torch.rand(T, N) > 0.3
    # an agent that leaves ends its episode there; its padding ends every step
    terminated = (torch.rand(T, N) < 0.1) | ~active
    terminated[:-1] |= active[:-1] & ~active[1:]
    batch = {"obs": torch.randn(T, N, 3), "action": torch.randint(0, 3, (T, N)),
             "reward": torch.randn(T, N), "terminated": terminated,
             "truncated": torch.zeros(T, N, dtype=bool), "log_prob": torch.full((T, N), -1.1),
             "value": torch.randn(T, N), "final_obs": torch.zeros(N, 1, 3),
             "bootstrap_obs": torch.randn(N, 3), "weight": active}
    garbage = {k: v.clone() for k, v in batch.items()}
    pad = ~active
    garbage["obs"][pad] = torch.randn(int(pad.sum()), 3) * 10
    garbage["reward"][pad] = 100.0
    garbage["log_prob"][pad] = -5.0
    garbage["value"][pad] = -50.0

    def trained(b):
        policy = ActorCritic(obs_space, act_space, [16])
        torch.manual_seed(1)
        algo = cfg.algorithm.make_update(cfg, policy, obs_space, act_space, "cpu")
        stats = algo.update(b, 3e-3, 0)
        return torch.cat([p.flatten() for p in policy.parameters()]), stats

    torch.manual_seed(2)
    clean, stats = trained(batch)
    torch.manual_seed(2)
    padded, padded_stats = trained(garbage)
    assert torch.allclose(clean, padded, atol=1e-6)
    assert all(torch.allclose(stats[k], padded_stats[k], atol=1e-5, equal_nan=True)
               for k in stats)
    torch.manual_seed(2)
    counted, _ = trained({k: v for k, v in garbage.items() if k != "weight"})
    assert not torch.allclose(clean, counted, atol=1e-3)
