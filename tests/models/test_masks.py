"""Dict observations and action masks in the networks and actors (fastrl.models.encoders,
fastrl.models.masks, the actors): a masked action is never taken, by the torch path, the
numpy path, random and epsilon-greedy actions alike, and carries no probability in the
loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from helpers import assert_restores

from fastrl.algos.dqn import DQN, EpsilonGreedy
from fastrl.config import AlgoConfig
from fastrl.memory.records import ObsRecord
from fastrl.models.actors import LegalRandomActor, policy_actor, random_actor
from fastrl.models.base import BasePolicy, sample_obs
from fastrl.models.encoders import (
    ImpalaCNN,
    ObsFeatures,
    RecordEncoder,
    leaf_tensor,
    make_encoder,
    observe_observations,
)
from fastrl.models.masks import action_mask
from fastrl.models.numpy_actor import NumpyActorCritic, numpy_actor
from fastrl.models.policy import ActorCritic
from fastrl.models.qnet import QNetwork
from fastrl.plan import make_policy

N = 6
MASKED = spaces.Dict({"observation": spaces.Box(-1, 1, (4,), np.float32),
                      "action_mask": spaces.Box(0, 1, (N,), np.int8)})
IMAGES = spaces.Dict({"camera": spaces.Box(0, 255, (20, 20, 3), np.uint8),
                      "joints": spaces.Box(-5, 5, (3,), np.float32),
                      "mode": spaces.Discrete(4)})


def masked_obs(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Records of MASKED with random masks (row 0: no legal action at all), and the legal
    actions they mean."""
    rng = np.random.default_rng(seed)
    masks = (rng.random((rows, N)) < 0.4).astype(np.int8)
    masks[0] = 0
    values = [{"observation": rng.uniform(-1, 1, 4).astype(np.float32), "action_mask": m}
              for m in masks]
    legal = masks.astype(bool)
    legal[~legal.any(1)] = True  # none legal (row 0, at least): every action is
    return ObsRecord(MASKED).pack(values), legal


def sharpened(policy: ActorCritic) -> ActorCritic:
    """Far-from-uniform action probabilities, so that a leak through the mask would show."""
    with torch.no_grad():
        policy.actor[-1].weight.mul_(300.0)
    return policy


def assert_legal(actions: np.ndarray, legal: np.ndarray, start: int = 0) -> None:
    taken = legal[np.arange(len(actions)), np.asarray(actions) - start]
    assert taken.all(), f"illegal actions in rows {np.flatnonzero(~taken)}"


def test_torch_and_numpy_paths_never_take_a_masked_action():
    torch.manual_seed(0), np.random.seed(0)
    policy = sharpened(ActorCritic(MASKED, spaces.Discrete(N, start=2), [32]))
    obs, legal = masked_obs(64)
    assert isinstance(numpy_actor(policy), NumpyActorCritic)  # records of flat leaves
    for act in (policy_actor(policy), numpy_actor(policy)):
        for _ in range(200):
            action, log_prob, _ = act(obs)
            assert_legal(action, legal, start=2)
            assert np.isfinite(log_prob).all()
    deterministic = policy.act(torch.from_numpy(obs), deterministic=True)[0].numpy()
    assert_legal(deterministic, legal, start=2)


def test_numpy_log_probs_agree_with_torch_under_the_mask():
    torch.manual_seed(1), np.random.seed(1)
    policy = ActorCritic(MASKED, spaces.Discrete(N), [16])
    obs, _ = masked_obs(32, seed=1)
    action, log_prob, value = numpy_actor(policy)(obs)
    ours, _, theirs_value = policy.evaluate(torch.from_numpy(obs), torch.from_numpy(action))
    np.testing.assert_allclose(log_prob, ours.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(value, theirs_value.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_the_loss_sees_only_legal_actions():
    torch.manual_seed(2)
    policy = ActorCritic(MASKED, spaces.Discrete(N), [16])
    obs, legal = masked_obs(16, seed=2)
    obs_t = torch.from_numpy(obs)
    action = torch.from_numpy(policy.act(obs_t)[0].numpy())
    log_prob, entropy, _ = policy.evaluate(obs_t, action)
    logits = policy.actor(policy._features(obs_t)).detach()
    for i in range(len(obs)):  # a Categorical over the legal logits alone
        dist = torch.distributions.Categorical(logits=logits[i][torch.from_numpy(legal[i])])
        index = int(np.flatnonzero(legal[i]).tolist().index(int(action[i])))
        assert log_prob[i].item() == pytest.approx(dist.log_prob(torch.tensor(index)).item(),
                                                   abs=1e-5)
        assert entropy[i].item() == pytest.approx(dist.entropy().item(), abs=1e-5)
    (log_prob.sum() + entropy.sum()).backward()
    assert all(torch.isfinite(p.grad).all() for p in policy.parameters() if p.grad is not None)


def test_a_legal_random_actor_restored_from_its_state_draws_what_the_saved_one_would_have():
    obs, _ = masked_obs(8, seed=1)
    assert_restores(lambda s: LegalRandomActor(spaces.Discrete(N), action_mask(
        MASKED, spaces.Discrete(N)), s), obs, 5)


def test_random_and_epsilon_greedy_actions_are_legal():
    obs, legal = masked_obs(64, seed=3)
    explore = random_actor(MASKED, spaces.Discrete(N), 64, seed=0)
    assert isinstance(explore, LegalRandomActor) and not hasattr(explore, "actions_into")
    seen = np.zeros((64, N), bool)
    for _ in range(100):
        action = explore(obs)[0]
        assert_legal(action, legal)
        seen[np.arange(64), action] = True
    assert (seen == legal).all()  # uniform among the legal ones: every one comes up
    q = QNetwork(MASKED, spaces.Discrete(N), [16])
    greedy = EpsilonGreedy(q, spaces.Discrete(N), seed=0)
    for epsilon in (0.0, 1.0):
        greedy.epsilon = epsilon
        for _ in range(50):
            assert_legal(greedy(obs)[0], legal)


def test_dqn_targets_range_over_legal_actions():
    torch.manual_seed(3)
    cfg = AlgoConfig(name="dqn")
    q = QNetwork(MASKED, spaces.Discrete(N), [16])
    obs, legal = masked_obs(32, seed=4)
    obs_t = torch.from_numpy(obs)
    q_values = q(obs_t)
    assert torch.isinf(q_values[torch.from_numpy(~legal)]).all()
    assert torch.isfinite(q_values[torch.from_numpy(legal)]).all()
    for double in (False, True):
        cfg.dqn.double = double
        batch = {"next_obs": obs_t, "reward": torch.zeros(32), "discount": torch.ones(32),
                 "done": torch.zeros(32)}
        best_legal = q_values.max(-1).values
        np.testing.assert_allclose(DQN(q, cfg).targets(batch).numpy(), best_legal.detach(),
                                   rtol=1e-6)


def test_a_mask_that_does_not_fit_the_actions_is_refused():
    with pytest.raises(TypeError, match=r"one flag per action, shape \(5,\) for Discrete\(5\)"):
        action_mask(MASKED, spaces.Discrete(5))
    with pytest.raises(TypeError, match="masks Discrete actions"):
        action_mask(MASKED, spaces.Box(-1, 1, (2,)))


def test_image_leaves_get_a_cnn_and_the_others_flat_features():
    encoder = make_encoder(IMAGES, "impala")
    assert isinstance(encoder, RecordEncoder)
    kinds = {leaf.name: type(e) for leaf, e in zip(encoder.leaves, encoder.encoders)}
    assert kinds == {"camera": ImpalaCNN, "joints": ObsFeatures, "mode": ObsFeatures}
    obs = sample_obs(IMAGES, 5)
    assert encoder(obs).shape == (5, ImpalaCNN.size + 3 + 4)
    record = ObsRecord(IMAGES)
    for leaf in record.leaves:  # the torch view of a leaf holds the numpy view's values
        np.testing.assert_array_equal(leaf_tensor(obs, leaf).numpy(),
                                      leaf.view(obs.numpy()))
    with pytest.raises(TypeError, match="has none"):
        make_encoder(MASKED, "nature")


def test_normalize_obs_standardises_a_record_s_box_leaves():
    policy = ActorCritic(IMAGES, spaces.Discrete(2), [8], encoder="flat", normalize_obs=True)
    norms = {leaf.name: e.norm for leaf, e in zip(policy._features.leaves,
                                                   policy._features.encoders)}
    assert norms["mode"] is None and norms["camera"] is not None
    before = norms["joints"].count.item()
    observe_observations(policy, sample_obs(IMAGES, 9))
    assert norms["joints"].count.item() == pytest.approx(before + 9)


class DictPolicy(BasePolicy):
    """A user policy that reads a Dict observation's leaves by key."""

    def __init__(self, obs_space, act_space, algo_config):
        super().__init__(obs_space, act_space, algo_config)
        self.seen = []
        self.head = torch.nn.Linear(4, N)

    def act(self, obs, deterministic=False):
        self.seen.append(sorted(obs))
        logits = self.head(obs["observation"]).masked_fill(obs["action_mask"] == 0, -1e9)
        action = logits.argmax(-1)
        return action, torch.zeros(len(action)), torch.zeros(len(action))


def test_a_user_policy_gets_the_leaves_by_key():
    policy = make_policy(AlgoConfig(name="none"), MASKED, spaces.Discrete(N), DictPolicy)
    obs, legal = masked_obs(8)
    action = policy_actor(policy)(obs)[0]
    assert policy.seen[-1] == ["action_mask", "observation"]
    assert_legal(action[1:], legal[1:])


class FeatureForward(BasePolicy):
    """A user policy whose forward takes features, the usual torch pattern, on a Dict."""

    def __init__(self, obs_space, act_space, algo_config):
        super().__init__(obs_space, act_space, algo_config)
        self.head = torch.nn.Linear(self.obs_features.size, N)

    def forward(self, features):
        return self.head(features)

    def act(self, obs, deterministic=False):
        action = self(self.obs_features(obs)).argmax(-1)
        return action, torch.zeros(len(action)), torch.zeros(len(action))


def test_a_forward_that_takes_features_gets_them_as_they_are():
    policy = make_policy(AlgoConfig(name="none"), IMAGES, spaces.Discrete(N), FeatureForward)
    obs = sample_obs(IMAGES, 5)
    features = policy.obs_features(obs)
    torch.testing.assert_close(policy(features), policy.head(features))
    assert policy_actor(policy)(obs.numpy())[0].shape == (5,)


def test_epsilon_greedy_acts_for_a_user_q_policy_without_a_mask():
    from user_policies import ZeroBasedQ

    space = spaces.Box(-1, 1, (3,), np.float32)
    q = make_policy(AlgoConfig(name="dqn"), space, spaces.Discrete(4), ZeroBasedQ)
    greedy = EpsilonGreedy(q, spaces.Discrete(4), seed=0)
    action = greedy(np.zeros((8, 3), np.float32))[0]  # epsilon 1: every action random
    assert action.shape == (8,) and ((action >= 0) & (action < 4)).all()
