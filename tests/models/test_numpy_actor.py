"""The numpy actor (fastrl.models.numpy_actor): the built-in policy's action distributions,
log-probabilities and values, computed on views of its parameters; every other policy acts
through torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from fastrl.algos.base import act_with_policy
from fastrl.memory.records import obs_record
from fastrl.models.numpy_actor import NumpyActorCritic, numpy_actor
from fastrl.models.policy import ActorCritic, flat_params, load_flat_params

OBS = spaces.Box(-np.inf, np.inf, (5,), np.float32)
DRAWS = 20_000


def sharpened(policy: ActorCritic) -> ActorCritic:
    """The policy with its output layer scaled up, so that its action probabilities are far
    from uniform (the orthogonal init's 0.01 gain makes them nearly equal)."""
    with torch.no_grad():
        policy.actor[-1].weight.mul_(200.0)
        policy.actor[-1].bias.copy_(torch.linspace(-1, 1, len(policy.actor[-1].bias)))
    return policy


def obs_batch(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 5)).astype(np.float32)


@pytest.mark.parametrize("normalize", [False, True])
def test_discrete_samples_follow_torch_s_probabilities(normalize):
    torch.manual_seed(0), np.random.seed(0)
    policy = sharpened(ActorCritic(OBS, spaces.Discrete(3, start=4), [32, 32],
                                   normalize_obs=normalize))
    if normalize:
        policy._features.norm.update(torch.randn(100, 5) * 3 + 1)
    obs = obs_batch(4)
    act = numpy_actor(policy)
    assert isinstance(act, NumpyActorCritic)
    with torch.no_grad():
        x = policy._features(torch.from_numpy(obs))
        log_p = policy.actor(x).log_softmax(-1).numpy()
        value = policy.critic(x)[:, 0].numpy()
    assert np.exp(log_p).max() > 0.6, "the probabilities to compare are nearly uniform"
    counts = np.zeros((4, 3))
    for _ in range(DRAWS):
        action, log_prob, v = act(obs)
        assert action.dtype == np.int64 and action.min() >= 4 and action.max() <= 6
        counts[np.arange(4), action - 4] += 1
        np.testing.assert_allclose(log_prob, log_p[np.arange(4), action - 4], atol=1e-5)
        np.testing.assert_allclose(v, value, rtol=1e-5, atol=1e-6)
    # every class frequency within 4.5 standard errors of torch's probability
    p = np.exp(log_p)
    assert (np.abs(counts / DRAWS - p) <= 4.5 * np.sqrt(p * (1 - p) / DRAWS) + 1e-9).all()
    # and torch's own sampler agrees with those probabilities the same way
    torch_counts = np.zeros((4, 3))
    for _ in range(DRAWS // 100):
        a, _, _ = policy.act(torch.from_numpy(np.tile(obs, (100, 1))))
        np.add.at(torch_counts, (np.tile(np.arange(4), 100), a.numpy() - 4), 1)
    assert (np.abs(torch_counts / DRAWS - p) <= 4.5 * np.sqrt(p * (1 - p) / DRAWS) + 1e-9).all()


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_box_samples_are_torch_s_gaussian_with_its_log_probs(activation):
    torch.manual_seed(0), np.random.seed(0)
    policy = ActorCritic(OBS, spaces.Box(-1, 1, (2, 2)), [16, 16], activation=activation)
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor([-1.0, 0.0, 0.5, -2.0]))
    obs = obs_batch(DRAWS // 4)
    act = numpy_actor(policy)
    assert isinstance(act, NumpyActorCritic)
    action, log_prob, value = act(obs)
    assert action.shape == (len(obs), 2, 2) and action.dtype == np.float32
    with torch.no_grad():
        x = policy._features(torch.from_numpy(obs))
        mean = policy.actor(x)
        ref_log_prob = policy._gaussian_log_prob(torch.from_numpy(action.reshape(-1, 4)), mean)
        np.testing.assert_allclose(value, policy.critic(x)[:, 0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(log_prob, ref_log_prob.numpy(), rtol=1e-4, atol=1e-4)
    z = (action.reshape(-1, 4) - mean.numpy()) / policy.log_std.exp().detach().numpy()
    assert np.abs(z.mean(0)).max() < 0.06 and np.abs(z.std(0) - 1).max() < 0.04


def test_the_actor_reads_the_weights_a_worker_loads():
    torch.manual_seed(0)
    policy = ActorCritic(OBS, spaces.Discrete(2), [8])
    act = numpy_actor(policy)
    obs = obs_batch(3)
    other = ActorCritic(OBS, spaces.Discrete(2), [8])
    load_flat_params(policy, flat_params(other))  # as a worker syncs, in place
    with torch.no_grad():
        expected = other.critic(torch.from_numpy(obs))[:, 0].numpy()
    np.testing.assert_allclose(act(obs)[2], expected, rtol=1e-5, atol=1e-6)


class Subclassed(ActorCritic):
    """A user's variation on the built-in policy: its own act must be the one called."""

    def act(self, obs, deterministic=False):
        n = obs.shape[0]
        return torch.ones(n, dtype=torch.int64), torch.zeros(n), torch.full((n,), 7.0)


def test_other_policies_and_the_torch_setting_act_through_torch():
    cnn = ActorCritic(spaces.Box(0, 255, (1, 40, 40), np.uint8), spaces.Discrete(2), [8])
    relu = ActorCritic(OBS, spaces.Discrete(2), [8])
    relu.actor[1] = nn.GELU()  # an activation the numpy actor does not compute
    for policy in (Subclassed(OBS, spaces.Discrete(2), [8]), cnn, relu):
        assert numpy_actor(policy) is None
    obs = obs_batch(2)
    action, _, value = act_with_policy(Subclassed(OBS, spaces.Discrete(2), [8]), None, 0,
                                       "numpy")(obs)
    assert action.tolist() == [1, 1] and value.tolist() == [7.0, 7.0]
    policy = ActorCritic(OBS, spaces.Discrete(2), [8])
    assert isinstance(act_with_policy(policy, None, 0, "numpy"), NumpyActorCritic)
    assert not isinstance(act_with_policy(policy, None, 0, "torch"), NumpyActorCritic)


@pytest.mark.parametrize("obs_space", [
    spaces.Discrete(7, start=-2),
    spaces.Dict({"state": spaces.Discrete(5, start=1), "pos": spaces.Box(-1, 1, (3,)),
                 "action_mask": spaces.MultiBinary(4)}),
], ids=["discrete", "record-with-a-discrete-leaf"])
def test_discrete_observations_are_one_hot_as_torch_s(obs_space):
    torch.manual_seed(0), np.random.seed(0)
    policy = ActorCritic(obs_space, spaces.Discrete(4), [16])
    act = numpy_actor(policy)
    assert isinstance(act, NumpyActorCritic)
    record = obs_record(obs_space)
    draws = [obs_space.sample() for _ in range(32)]
    if record is not None:
        for d in draws:
            d["action_mask"][0] = 1  # (one legal action at least)
    obs = record.pack(draws) if record is not None else np.asarray(draws, np.int64)
    action, log_prob, value = act(obs)
    theirs, _, theirs_value = policy.evaluate(torch.from_numpy(obs), torch.from_numpy(action))
    np.testing.assert_allclose(log_prob, theirs.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(value, theirs_value.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_draws_come_from_numpy_s_global_state_which_a_parked_worker_saves():
    policy = ActorCritic(OBS, spaces.Discrete(4), [8])
    act, obs = numpy_actor(policy), obs_batch(64)
    np.random.seed(5)
    first = [act(obs)[0].copy() for _ in range(3)]
    np.random.seed(5)
    assert all(np.array_equal(a, act(obs)[0]) for a in first)
