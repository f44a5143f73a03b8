"""ActorCritic (fastrl.models.policy): its heads, Discrete offsets, flat weight round trips,
and the settings of the built-in network (activation, init, initial log-std)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from fastrl.config import load_config
from fastrl.models.families import build_actor_critic
from fastrl.models.policy import (
    ActorCritic,
    UnsupportedActionSpace,
    flat_params,
    load_flat_params,
    sample_classes,
)


def test_box_actions_have_gaussian_log_probs_and_entropy():
    policy = ActorCritic(spaces.Box(-1, 1, (3,)), spaces.Box(-2, 2, (2,)), [16])
    obs = torch.zeros(5, 3)
    action, logp, value = policy.act(obs)
    assert action.shape == (5, 2) and logp.shape == (5,) and value.shape == (5,)
    logp2, ent, _ = policy.evaluate(obs, action)
    assert torch.allclose(logp, logp2) and ent.shape == (5,)
    mode, _, _ = policy.act(obs, deterministic=True)
    assert torch.equal(mode, policy.act(obs, deterministic=True)[0])


def test_box_log_probs_and_entropy_are_the_normal_s():
    policy = ActorCritic(spaces.Box(-1, 1, (3,)), spaces.Box(-2, 2, (2, 2)), [16])
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor([-1.0, 0.0, 0.5, 2.0]))
    mean, action = torch.randn(7, 4), torch.randn(7, 4) * 3
    logp, ent = policy._log_prob_entropy(mean, action)
    ref = torch.distributions.Normal(mean, policy.log_std.exp())
    assert torch.allclose(logp, ref.log_prob(action).sum(-1), atol=1e-5)
    assert torch.allclose(ent, ref.entropy().sum(-1))
    # samples: spread by the std, reshaped to the action shape
    sampled, _, _ = policy.act(torch.zeros(20_000, 3))
    mode = policy.act(torch.zeros(1, 3), deterministic=True)[0]
    std = (sampled - mode).flatten(1).std(0)
    assert sampled.shape == (20_000, 2, 2)
    assert torch.allclose(std, policy.log_std.exp(), rtol=0.05)


def test_sampled_classes_follow_the_probabilities_and_never_pick_a_masked_one():
    torch.manual_seed(0)
    log_p = torch.tensor([0.2, 0.5, 0.3, 0.0]).log().expand(100_000, 4)
    counts = torch.bincount(sample_classes(log_p), minlength=4)
    assert counts[3] == 0
    # 4.5 standard deviations of a binomial with n=100k, p<=0.5
    assert torch.allclose(counts[:3] / 100_000, torch.tensor([0.2, 0.5, 0.3]), atol=0.007)
    # any leading batch shape
    assert sample_classes(log_p.reshape(10, 10_000, 4)).shape == (10, 10_000)


def test_discrete_log_probs_and_entropy_are_the_categorical_s_even_with_masked_logits():
    policy = ActorCritic(spaces.Box(-1, 1, (3,)), spaces.Discrete(4, start=2), [8])
    logits = torch.randn(6, 4) * 3
    logits[0, 1] = -torch.inf  # a class a user's module masks out
    actions = torch.tensor([0, 2, 3, 1, 0, 2])
    logp, ent = policy._log_prob_entropy(logits, actions)
    dist = torch.distributions.Categorical(logits=logits)
    assert torch.allclose(logp, dist.log_prob(actions)) and torch.allclose(ent, dist.entropy())
    assert torch.isfinite(ent).all()
    # and through evaluate(): stored actions carry the start offset
    obs = torch.randn(6, 3)
    action, logp_act, _ = policy.act(obs)
    assert torch.allclose(policy.evaluate(obs, action)[0], logp_act)


def test_discrete_observations_are_one_hot_and_time_major_batches_work():
    policy = ActorCritic(spaces.Discrete(5), spaces.Discrete(3), [8])
    obs = torch.tensor([[0, 4], [2, 1]])
    action, logp, value = policy.act(obs)
    assert action.shape == logp.shape == value.shape == (2, 2)
    assert ((0 <= action) & (action < 3)).all()


def test_discrete_spaces_with_a_start_offset():
    policy = ActorCritic(spaces.Discrete(4, start=10), spaces.Discrete(3, start=-1), [8])
    obs = torch.tensor([10, 13, 11])
    for _ in range(20):
        action, logp, _ = policy.act(obs)
        assert ((-1 <= action) & (action <= 1)).all()
        assert torch.allclose(policy.evaluate(obs, action)[0], logp)


def test_unsupported_action_space_is_named():
    with pytest.raises(UnsupportedActionSpace, match="Discrete or Box.*MultiBinary"):
        ActorCritic(spaces.Box(-1, 1, (3,)), spaces.MultiBinary(3), [16])


def test_flat_params_round_trip_without_aliasing():
    a = ActorCritic(spaces.Box(-1, 1, (4,)), spaces.Discrete(2), [8])
    b = ActorCritic(spaces.Box(-1, 1, (4,)), spaces.Discrete(2), [8])
    flat = flat_params(a)
    load_flat_params(b, flat)
    assert np.array_equal(flat_params(b), flat)
    flat[:] = 0  # b must not see later writes into the buffer it was loaded from
    assert not np.array_equal(flat_params(b), flat)


VECTORS = spaces.Box(-1, 1, (3,))


def built(overrides: list[str], obs_space: spaces.Space = VECTORS) -> nn.Module:
    """The built-in actor-critic of a config of ``overrides``, for Box(2) actions."""
    return build_actor_critic(obs_space, spaces.Box(-2, 2, (2,)),
                              load_config(None, overrides).algo)


@pytest.mark.parametrize("core", ["none", "lstm"])
def test_activation_is_that_of_every_hidden_layer(core):
    for name, activation in (("tanh", nn.Tanh), ("relu", nn.ReLU)):
        policy = built([f"algo.activation={name}", f"algo.core={core}"])
        for net in (policy.actor, policy.critic):
            assert [type(m) for m in net] == [nn.Linear, activation] * 2 + [nn.Linear]


@pytest.mark.parametrize("core, obs_space", [
    ("none", VECTORS),
    ("lstm", VECTORS),
    ("none", spaces.Box(0, 255, (1, 36, 36), np.uint8)),  # the Nature CNN's layers too
], ids=["mlp", "lstm", "cnn"])
def test_without_ortho_init_every_layer_keeps_torch_s_init(core, obs_space):
    torch.manual_seed(0)
    for ortho in (True, False):
        policy = built(["algo.hidden_sizes=[32,32]", f"algo.core={core}",
                        f"algo.ortho_init={str(ortho).lower()}"], obs_space)
        # the 32x32 hidden layer: orthogonal of gain sqrt(2) (W W^T = 2 I), or torch's uniform
        w = policy.actor[2].weight.detach()
        assert torch.allclose(w @ w.T, 2 * torch.eye(32), atol=1e-4) == ortho
        # CleanRL's init zeroes every bias (the encoder's, the core's), torch's does not
        biases = [p for name, p in policy.named_parameters() if "bias" in name]
        assert biases and all(bool(b.any()) != ortho for b in biases)


def test_log_std_init_is_the_gaussian_s_first_log_std():
    assert torch.equal(built([]).log_std.detach(), torch.zeros(2))
    for core in ("none", "gru"):
        policy = built(["algo.log_std_init=-0.5", f"algo.core={core}"])
        assert torch.equal(policy.log_std.detach(), torch.full((2,), -0.5))
