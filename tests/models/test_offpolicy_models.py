"""The off-policy networks: QNetwork (fastrl.models.qnet) acts in Discrete spaces only;
SAC's squashed Gaussian actor (fastrl.models.sac) has the log-probabilities of torch's
transformed distribution and refuses unbounded or Discrete actions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch.distributions import AffineTransform, Normal, TanhTransform, TransformedDistribution

from fastrl.models.policy import UnsupportedActionSpace
from fastrl.models.qnet import QNetwork
from fastrl.models.sac import SquashedGaussianActor


def test_dqn_refuses_box_actions():
    with pytest.raises(UnsupportedActionSpace, match="Discrete.*algo.name=sac"):
        QNetwork(spaces.Box(-1, 1, (3,)), spaces.Box(-1, 1, (2,)), [8])



def test_squashed_gaussian_log_prob_matches_torch_transformed_distribution():
    torch.manual_seed(0)
    low, high = np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)
    actor = SquashedGaussianActor(spaces.Box(-1, 1, (3,)), spaces.Box(low, high), [16])
    obs = torch.randn(256, 3)
    action, logp = actor.sample(obs)
    assert (action >= torch.from_numpy(low)).all() and (action <= torch.from_numpy(high)).all()
    mean, log_std = actor._normal(obs)
    ref = TransformedDistribution(Normal(mean, log_std.exp()), [
        TanhTransform(), AffineTransform(actor.bias, actor.scale)])
    inside = (action - actor.bias).abs() < actor.scale * 0.999  # atanh is exact away from 1
    ref_logp = ref.log_prob(action)
    rows = inside.all(-1)
    assert torch.allclose(logp[rows], ref_logp[rows].sum(-1), atol=1e-2)
    det, _, _ = actor.act(obs, deterministic=True)
    assert torch.allclose(det, torch.tanh(mean) * actor.scale + actor.bias)


def test_sac_refuses_unbounded_or_discrete_actions():
    with pytest.raises(UnsupportedActionSpace, match="infinite"):
        SquashedGaussianActor(spaces.Box(-1, 1, (3,)), spaces.Box(-np.inf, np.inf, (2,)), [8])
    with pytest.raises(UnsupportedActionSpace, match="Box.*algo.name=dqn"):
        SquashedGaussianActor(spaces.Box(-1, 1, (3,)), spaces.Discrete(3), [8])

