"""The off-policy algorithms (fastrl.algos.dqn, fastrl.algos.sac): Ape-X exploration, DQN
targets and target updates, SAC's updates and alpha, learning rates after a resume, updates
on the learner's device."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces

from fastrl.algos.dqn import DQN, EpsilonGreedy, apex_epsilon
from fastrl.algos.sac import SAC
from fastrl.config import load_config
from fastrl.models.qnet import QNetwork
from fastrl.models.sac import SquashedGaussianActor, TwinQ


# --- exploration ---------------------------------------------------------------------------
def test_apex_epsilons_spread_across_workers_and_decay_linearly():
    cfg = load_config(None, ["algo.name=dqn", "algo.dqn.eps_base=0.4", "algo.dqn.eps_alpha=7",
                             "algo.dqn.eps_start=1.0", "algo.dqn.exploration_fraction=0.5"])
    dqn = cfg.algo.dqn
    assert apex_epsilon(dqn, 0, 4, 0, 1000) == 1.0
    assert apex_epsilon(dqn, 0, 4, 250, 1000) == pytest.approx((1 + 0.4) / 2)
    finals = [apex_epsilon(dqn, i, 4, 10_000, 1000) for i in range(4)]
    assert finals[0] == pytest.approx(0.4) and finals[3] == pytest.approx(0.4 ** 8)
    assert finals == sorted(finals, reverse=True)
    assert apex_epsilon(dqn, 0, 1, 10_000, 1000) == pytest.approx(0.4)


def test_epsilon_greedy_is_greedy_at_zero_and_uniform_at_one():
    torch.manual_seed(0)
    q = QNetwork(spaces.Box(-1, 1, (3,)), spaces.Discrete(4, start=2), [16])
    obs = np.random.default_rng(0).normal(size=(4000, 3)).astype(np.float32)
    actor = EpsilonGreedy(q, spaces.Discrete(4, start=2), seed=1)
    actor.epsilon = 0.0
    greedy, _, value = actor(obs)
    qs = q(torch.from_numpy(obs))
    assert np.array_equal(greedy, qs.argmax(-1).numpy() + 2)
    assert np.allclose(value, qs.max(-1).values.detach().numpy())
    actor.epsilon = 1.0
    counts = np.bincount(actor(obs)[0] - 2, minlength=4)
    assert counts.sum() == 4000 and counts.min() > 850  # ~1000 each


# --- DQN -----------------------------------------------------------------------------------
def _batch(n, obs_dim=3, n_actions=2, seed=0):
    """A random replay batch of ``n`` n-step transitions."""
    g = torch.Generator().manual_seed(seed)
    return {"obs": torch.randn(n, obs_dim, generator=g),
            "action": torch.randint(0, n_actions, (n,), generator=g),
            "reward": torch.randn(n, generator=g),
            "next_obs": torch.randn(n, obs_dim, generator=g),
            "done": (torch.rand(n, generator=g) < 0.3).float(),
            "discount": torch.full((n,), 0.99 ** 3),
            "weights": torch.ones(n)}


@pytest.mark.parametrize("double", [True, False])
def test_dqn_targets_match_a_per_sample_reference(double):
    cfg = load_config(None, ["algo.name=dqn", f"algo.dqn.double={str(double).lower()}"])
    torch.manual_seed(0)
    q = QNetwork(spaces.Box(-1, 1, (3,)), spaces.Discrete(2), [8])
    algo = DQN(q, cfg.algo)
    with torch.no_grad():  # make target and online nets differ
        for p in algo.target.parameters():
            p.add_(0.3)
    batch = _batch(16)
    y = algo.targets(batch)
    for i in range(16):
        s2 = batch["next_obs"][i]
        a = int(q(s2).argmax()) if double else int(algo.target(s2).argmax())
        bootstrap = 0.0 if batch["done"][i] else float(batch["discount"][i] *
                                                        algo.target(s2)[a])
        assert float(y[i]) == pytest.approx(float(batch["reward"][i]) + bootstrap, abs=1e-5)


def test_dqn_fits_a_fixed_batch_and_updates_its_target_on_schedule():
    cfg = load_config(None, ["algo.name=dqn", "algo.lr=1e-2", "algo.dqn.target_every=5",
                             "algo.max_grad_norm=10"])
    torch.manual_seed(0)
    q = QNetwork(spaces.Box(-1, 1, (3,)), spaces.Discrete(2), [32], dueling=True)
    algo = DQN(q, cfg.algo)
    batch = _batch(64)
    batch["done"][:] = 1  # targets are the rewards: a regression the net must fit
    first, td = algo.update(batch)
    assert td.shape == (64,) and (td >= 0).all()
    for i in range(2, 5):
        algo.update(batch)
        assert not torch.equal(next(algo.target.parameters()), next(q.parameters())), i
    algo.update(batch)  # the 5th update copies (tau = 1)
    assert all(torch.equal(t, o) for t, o in zip(algo.target.parameters(), q.parameters()))
    for _ in range(200):
        last, _ = algo.update(batch)
    assert last["q_loss"] < 0.2 * first["q_loss"]


def test_resumed_algorithms_take_the_configs_learning_rates():
    torch.manual_seed(0)
    obs_space, act_space = spaces.Box(-1, 1, (3,)), spaces.Box(-1, 1, (2,))
    old = load_config(None, ["algo.name=sac", "algo.lr=1e-3", "algo.sac.q_lr=1e-3"])
    new = load_config(None, ["algo.name=sac", "algo.lr=1e-5", "algo.sac.q_lr=2e-5"])
    saved = SAC(SquashedGaussianActor(obs_space, act_space, [8]),
                TwinQ(obs_space, act_space, [8]), old.algo).state_dict()
    sac = SAC(SquashedGaussianActor(obs_space, act_space, [8]),
              TwinQ(obs_space, act_space, [8]), new.algo)
    sac.load_state_dict(saved)
    assert sac.actor_opt.param_groups[0]["lr"] == 1e-5
    assert sac.critic_opt.param_groups[0]["lr"] == 2e-5
    q_space = spaces.Discrete(2)
    saved = DQN(QNetwork(obs_space, q_space, [8]), load_config(None, ["algo.lr=1e-3"]).algo)
    dqn = DQN(QNetwork(obs_space, q_space, [8]), load_config(None, ["algo.lr=3e-5"]).algo)
    dqn.load_state_dict(saved.state_dict())
    assert dqn.optimizer.param_groups[0]["lr"] == 3e-5


# --- SAC -----------------------------------------------------------------------------------


def test_sac_update_moves_every_network_and_tunes_alpha():
    cfg = load_config(None, ["algo.name=sac"])
    torch.manual_seed(0)
    obs_space, act_space = spaces.Box(-1, 1, (3,)), spaces.Box(-1, 1, (2,))
    actor = SquashedGaussianActor(obs_space, act_space, [16])
    algo = SAC(actor, TwinQ(obs_space, act_space, [16]), cfg.algo)
    before = [copy.deepcopy(m.state_dict()) for m in (actor, algo.critic, algo.target)]
    batch = _batch(32)
    batch["action"] = torch.rand(32, 2) * 2 - 1
    stats, td = algo.update(batch)
    assert td.shape == (32,) and stats["alpha"] == pytest.approx(0.2)
    for old, module in zip(before, (actor, algo.critic, algo.target)):
        assert any(not torch.equal(old[k], v) for k, v in module.state_dict().items())
    algo.update(batch)
    assert algo.log_alpha.exp().item() != pytest.approx(0.2, abs=1e-7)


# --- devices -------------------------------------------------------------------------------


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA (the CPU case runs everywhere)"))]


@pytest.mark.parametrize("device", DEVICES)
def test_dqn_and_sac_update_on_the_learner_device(device):
    """What the learner does per update: networks and batch on ``device``, TD errors back
    to the host for the priorities, a checkpoint's state loaded onto the device."""
    torch.manual_seed(0)
    obs_space = spaces.Box(-1, 1, (3,))
    batch = {k: v.to(device) for k, v in _batch(16).items()}
    dqn = DQN(QNetwork(obs_space, spaces.Discrete(2), [8]).to(device),
              load_config(None, ["algo.name=dqn"]).algo)
    stats, td = dqn.update(batch)
    assert td.device.type == device and np.isfinite(td.cpu().numpy()).all()
    act_space = spaces.Box(-1, 1, (2,))
    cfg = load_config(None, ["algo.name=sac"]).algo
    sac = SAC(SquashedGaussianActor(obs_space, act_space, [8]).to(device),
              TwinQ(obs_space, act_space, [8]).to(device), cfg)
    batch["action"] = torch.rand(16, 2, device=device) * 2 - 1
    stats, td = sac.update(batch)
    assert td.device.type == device and all(np.isfinite(float(v)) for v in stats.values())
    state = sac.state_dict()
    sac.load_state_dict(state)
    assert sac.log_alpha.device.type == device
    action, _, _ = sac.actor.act(batch["obs"], deterministic=True)
    assert action.device.type == device and action.shape == (16, 2)
