"""The learner's numpy gradient (fastrl.models.numpy_grad): the built-in actor-critic's
log-probabilities, entropies and values, and the gradient of any loss of them, equal
autograd's; PPO's update through it takes the autograd update's steps."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces

from fastrl.algos.ppo import PPO
from fastrl.config import AlgoConfig
from fastrl.memory.records import obs_record
from fastrl.models.numpy_grad import NumpyGrad
from fastrl.models.policy import ActorCritic

BOX = spaces.Box(-np.inf, np.inf, (5,), np.float32)
MASKED = spaces.Dict({"state": spaces.Discrete(5, start=1), "pos": spaces.Box(-1, 1, (3,)),
                      "action_mask": spaces.MultiBinary(4)})
POLICIES = {
    "discrete": dict(obs_space=BOX, act_space=spaces.Discrete(3, start=2)),
    "masked-record": dict(obs_space=MASKED, act_space=spaces.Discrete(4)),
    "box-normalized-relu": dict(obs_space=BOX, act_space=spaces.Box(-1, 1, (2,)),
                                normalize_obs=True, activation="relu"),
    "float64-box-actions": dict(obs_space=BOX, act_space=spaces.Box(-1, 1, (2, 2), np.float64)),
}


def make_policy(name: str) -> ActorCritic:
    """A policy of :data:`POLICIES` with its output layers scaled up, so that its actions
    are far from uniform and its gradients far from zero."""
    torch.manual_seed(0)
    kw = POLICIES[name]
    policy = ActorCritic(kw["obs_space"], kw["act_space"], [16, 16],
                         normalize_obs=kw.get("normalize_obs", False),
                         activation=kw.get("activation", "tanh"))
    with torch.no_grad():
        policy.actor[-1].weight.mul_(100.0)
        if kw.get("normalize_obs"):
            policy._features.norm.mean.fill_(0.3)
            policy._features.norm.var.fill_(2.0)
    return policy


def observations(space: spaces.Space, n: int) -> np.ndarray:
    """``n`` observations of ``space`` as the ring stores them (a mask with no legal
    action among them)."""
    space.seed(1)
    draws = [space.sample() for _ in range(n)]
    record = obs_record(space)
    if record is None:
        return np.asarray(draws, np.float32)
    for d in draws:
        d["action_mask"][0] = 1
    draws[0]["action_mask"][:] = 0  # no legal action: every one is
    return record.pack(draws)


def policy_and_batch(name: str, n: int = 24):
    """A policy of :data:`POLICIES`, ``n`` observations and the actions it samples."""
    policy = make_policy(name)
    obs = torch.from_numpy(observations(POLICIES[name]["obs_space"], n))
    with torch.no_grad():
        action, _, _ = policy.act(obs)
    space = POLICIES[name]["act_space"]
    if isinstance(space, spaces.Box):  # stored in the space's dtype, as the ring does
        action = action.to(torch.from_numpy(np.empty(0, space.dtype)).dtype)
    return policy, obs, action


@pytest.mark.parametrize("name", POLICIES)
def test_outputs_and_gradients_equal_autograd_s(name):
    policy, obs, action = policy_and_batch(name)
    grad = NumpyGrad(policy)
    assert NumpyGrad.supports(policy)
    x, legal = grad.inputs(obs.numpy())
    flat = policy._flat_action(action).numpy()
    mine = grad.evaluate(x, legal, flat.astype(np.float32 if policy.continuous else np.intp))
    theirs = policy.evaluate(obs, action)
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-5, atol=1e-5)

    rng = np.random.default_rng(2)
    d_logp, d_v = (rng.normal(size=len(obs)).astype(np.float32) for _ in range(2))
    d_ent = 0.7
    views = grad.bind_grads()
    grad.backward(d_logp, d_ent, d_v)
    mine = [v.copy() for v in views]
    policy.zero_grad()
    logp, ent, value = policy.evaluate(obs, action)
    loss = (torch.from_numpy(d_logp) * logp).sum() + d_ent * ent.sum() \
        + (torch.from_numpy(d_v) * value).sum()
    loss.backward()
    theirs = [p.grad for p in policy.parameters() if p.grad is not None]
    assert len(mine) == len(theirs) > 6
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-4, atol=1e-4)
        assert np.abs(a).max() > 0


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("overrides", [
    dict(num_minibatches=1),
    dict(num_minibatches=3, ent_coef=0.05, clip_vloss=True, clip_coef=0.05),
])
def test_ppo_steps_through_numpy_as_through_autograd(name, overrides):
    policy, obs, action = policy_and_batch(name)
    T, N = 6, 4
    torch.manual_seed(3)
    with torch.no_grad():
        log_prob = (policy.evaluate(obs, action)[0] + 0.1 * torch.randn(len(obs))).float()
    batch = {"obs": obs.view(T, N, -1), "action": action.view(T, N, *action.shape[1:]),
             "reward": torch.randn(T, N), "terminated": torch.rand(T, N) < 0.2,
             "truncated": torch.zeros(T, N, dtype=bool), "log_prob": log_prob.view(T, N),
             "value": torch.randn(T, N), "final_obs": torch.zeros(N, 1, *obs.shape[1:]),
             "bootstrap_obs": obs[:N]}
    if obs.dtype == torch.uint8:
        batch["final_obs"] = batch["final_obs"].to(torch.uint8)
    cfg = AlgoConfig(update_epochs=3, **overrides)
    reference = copy.deepcopy(policy)
    by_numpy, by_autograd = PPO(policy, cfg), PPO(reference, cfg)
    assert by_numpy._numpy is not None
    by_autograd._numpy = None
    torch.manual_seed(4)
    mine = by_numpy.update(batch, 3e-3, 0)
    torch.manual_seed(4)
    theirs = by_autograd.update(batch, 3e-3, 0)
    for a, b in zip(policy.parameters(), reference.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=2e-5)
    assert any(not torch.equal(a, b) for a, b in zip(policy.parameters(),
                                                       make_policy(name).parameters()))
    for key in theirs:
        np.testing.assert_allclose(mine[key].item(), theirs[key].item(), rtol=1e-4,
                                   atol=1e-5, err_msg=key)


def test_float64_policies_and_frozen_layers_take_autograd():
    float64 = ActorCritic(BOX, spaces.Discrete(2), [8]).double()
    assert not NumpyGrad.supports(float64)
    assert PPO(float64, AlgoConfig())._numpy is None
    fixed_std = ActorCritic(BOX, spaces.Box(-1, 1, (2,)), [8])
    assert NumpyGrad.supports(fixed_std)
    fixed_std.log_std.requires_grad_(False)
    assert not NumpyGrad.supports(fixed_std)
