"""GAE against hand-computed values; the collector's handling of episode ends."""

from __future__ import annotations

import numpy as np
import pytest
import scripted_envs  # noqa: F401 - registers Count-v0
import torch
from torch import nn

from fastrl.algos.ppo import PPO, compute_gae
from fastrl.config import AlgoConfig
from fastrl.envs.source import EnvGroup, EnvSource
from fastrl.memory.layout import trajectory_layout
from fastrl.models.actors import policy_actor
from fastrl.models.policy import ActorCritic
from fastrl.rollout.collector import Collector

G, L = 0.5, 0.5


def t(x, dtype=torch.float32):
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


class ObsValue(nn.Module):
    """Stand-in policy whose value is the observation itself (so V(s) tells which s)."""

    def __init__(self):
        super().__init__()
        self.dummy = nn.Parameter(torch.zeros(1))

    def value(self, obs):
        return obs[..., 0].float()


def collect(env_kwargs: dict, rollout_len: int, num_envs: int = 1):
    envs = EnvGroup(EnvSource("scripted_envs:Count-v0", env_kwargs), list(range(num_envs)))
    policy = ActorCritic(envs.observation_space, envs.action_space, [8])
    layout = trajectory_layout(envs.observation_space, envs.action_space, rollout_len, num_envs)
    slot = layout.views(memoryview(bytearray(layout.nbytes)), 0)
    Collector(envs, policy_actor(policy), first_env_id=0, total_envs=num_envs).fill(slot, 0, 3)
    return slot


def test_collector_terminations_reset_in_place_without_fake_transitions():
    slot = collect({"terminate_at": 3}, rollout_len=7)
    assert slot["obs"][:, 0, 0].tolist() == [0, 1, 2, 100, 101, 102, 200]
    assert slot["terminated"][:, 0].tolist() == [0, 0, 1, 0, 0, 1, 0]
    assert not slot["truncated"].any()
    assert (slot["reward"] == 1).all(), "a fake (autoreset) transition entered the slot"
    assert slot["episode_return"][[2, 5], 0].tolist() == [3, 3]
    assert slot["episode_length"][[2, 5], 0].tolist() == [3, 3]
    assert slot["episode_id"][:, 0].tolist() == [0, 0, 0, 1, 1, 1, 2]
    assert slot["bootstrap_obs"][0, 0] == 201
    assert (slot["policy_version"] == 3).all()
    assert slot["global_step"][:, 0].tolist() == list(range(7))


def test_truncation_bootstraps_from_the_real_final_observation():
    # Episodes truncated after 2 steps by TimeLimit; the slot ends mid-episode.
    slot = collect({"max_episode_steps": 2}, rollout_len=5)
    assert slot["obs"][:, 0, 0].tolist() == [0, 1, 100, 101, 200]
    assert slot["truncated"][:, 0].tolist() == [0, 1, 0, 1, 0]
    assert not slot["terminated"].any()
    assert slot["final_obs"][[1, 3], 0, 0].tolist() == [2, 102]
    assert slot["bootstrap_obs"][0, 0] == 201

    batch = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in slot.items()}
    batch["value"] = batch["obs"][..., 0].clone()  # as ObsValue would have said in rollout
    cfg = AlgoConfig(gamma=G, gae_lambda=L)
    adv, returns = PPO(ObsValue(), cfg).advantages(batch)
    v = [0, 1, 100, 101, 200]
    # next-state values of the same episode: V(1), V(final 2), V(101), V(final 102), V(201)
    nxt = [1, 2, 101, 102, 201]
    delta = [1 + G * n - x for n, x in zip(nxt, v)]
    cont = [1, 0, 1, 0, 1]
    a = [0.0] * 5
    for i in reversed(range(5)):
        a[i] = delta[i] + (G * L * cont[i] * a[i + 1] if i < 4 else 0.0)
    assert adv[:, 0].tolist() == pytest.approx(a)
    assert returns[:, 0].tolist() == pytest.approx([x + y for x, y in zip(a, v)])


def test_evaluation_cuts_episodes_of_envs_without_a_time_limit():
    from fastrl.eval.harness import evaluate

    envs = EnvGroup(EnvSource("scripted_envs:Count-v0", {}), [0])  # never terminates
    policy = ActorCritic(envs.observation_space, envs.action_space, [8])
    result = evaluate(policy, EnvSource("scripted_envs:Count-v0"), [0, 1], max_steps=50)
    assert result["length_mean"] == 50 and result["return_mean"] == 50


def test_stale_final_observations_never_reach_the_network():
    # final_obs is written only where an episode was truncated; elsewhere the ring holds
    # stale bytes (zeros at first), which a Discrete(4, start=10) network cannot one-hot.
    from gymnasium import spaces

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
