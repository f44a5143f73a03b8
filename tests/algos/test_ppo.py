"""PPO and APPO updates (fastrl.algos.ppo, fastrl.algos.appo): GAE against hand-computed
values; stale final observations never reach the network in an update; update statistics
stay on the device."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from fastrl.algos.ppo import PPO, compute_gae
from fastrl.config import AlgoConfig, load_config
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
    # final_obs is written only where an episode was truncated; elsewhere the ring holds
    # stale bytes (zeros at first), which a Discrete(4, start=10) network cannot one-hot.
    policy = ActorCritic(spaces.Discrete(4, start=10), spaces.Discrete(2), [8])
    T, N = 4, 3
    truncated = torch.zeros(T, N, dtype=torch.bool)
    truncated[1, 0] = True
    final_obs = torch.zeros(T, N, dtype=torch.int64)
    final_obs[1, 0] = 12
    batch = {"obs": torch.randint(10, 14, (T, N)), "action": torch.randint(0, 2, (T, N)),
             "reward": torch.ones(T, N), "terminated": torch.zeros(T, N, dtype=torch.bool),
             "truncated": truncated, "log_prob": torch.full((T, N), -0.69),
             "value": torch.zeros(T, N), "final_obs": final_obs,
             "bootstrap_obs": torch.randint(10, 14, (N,))}
    stats = PPO(policy, AlgoConfig(num_minibatches=2)).update(batch, 1e-3)
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
                 "final_obs": torch.full((T, N, 3), float("nan")),  # stale: never picked
                 "bootstrap_obs": torch.rand(N, 3)}
        stats = algo.update(batch, 1e-3)
        assert all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in stats.values())
        assert all(torch.isfinite(v) for v in stats.values()), (name, stats)

