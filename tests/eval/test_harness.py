"""The evaluation harness (fastrl.eval.harness): later episodes of a seed continue its env,
cut episodes count and the next one continues, episodes of envs without a time limit are
cut at max_steps."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import scripted_envs  # noqa: F401 - registers Count-v0
import torch

from fastrl.envs.source import EnvGroup, EnvSource
from fastrl.eval.harness import evaluate, evaluate_episodes
from fastrl.eval.policy import load_policy
from fastrl.models.policy import ActorCritic

pytestmark = pytest.mark.usefixtures("one_torch_thread")
CARTPOLE = EnvSource("CartPole-v1")


@pytest.fixture
def run(checkpointed_run):
    """The shared finished run (checkpoints at steps 512, 1024, 1536); read only."""
    return checkpointed_run


def play_by_hand(policy, seed: int, episodes: int) -> tuple[list[float], list[np.ndarray]]:
    """Returns and first observations of a seed's episodes, resetting unseeded in between."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    returns, starts = [], []
    for _ in range(episodes):
        starts.append(obs)
        total, done = 0.0, False
        while not done:
            action, _, _ = policy.act(torch.as_tensor(obs[None]), deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(int(action[0]))
            total += reward
            done = terminated or truncated
        returns.append(total)
        obs, _ = env.reset()
    env.close()
    return returns, starts


def test_later_episodes_of_a_seed_continue_its_env(run):
    policy = load_policy(run).policy
    episodes = evaluate_episodes(policy, CARTPOLE, [10_000, 10_001], episodes_per_seed=3)
    assert episodes.returns.shape == episodes.lengths.shape == (2, 3)
    for row, seed in enumerate([10_000, 10_001]):
        returns, starts = play_by_hand(policy, seed, 3)
        assert not np.array_equal(starts[0], starts[1]), "episode 1 replayed the seed"
        assert episodes.returns[row].tolist() == returns
        assert episodes.lengths[row].tolist() == returns  # CartPole: reward 1 per step
    first = evaluate_episodes(policy, CARTPOLE, [10_000, 10_001])
    assert first.returns[:, 0].tolist() == episodes.returns[:, 0].tolist()


def test_cut_episodes_count_and_the_next_one_continues():
    source = EnvSource("scripted_envs:Count-v0")  # never terminates
    probe = source.make([0])
    policy = ActorCritic(probe.observation_space, probe.action_space, [8])
    probe.close()
    episodes = evaluate_episodes(policy, source, [0, 1], max_steps=7, episodes_per_seed=3)
    assert episodes.lengths.tolist() == [[7, 7, 7]] * 2
    assert episodes.summary()["episodes"] == 6.0



def test_evaluation_cuts_episodes_of_envs_without_a_time_limit():
    envs = EnvGroup(EnvSource("scripted_envs:Count-v0", {}), [0])  # never terminates
    policy = ActorCritic(envs.observation_space, envs.action_space, [8])
    result = evaluate(policy, EnvSource("scripted_envs:Count-v0"), [0, 1], max_steps=50)
    assert result["length_mean"] == 50 and result["return_mean"] == 50

