"""The seeded masked identity task (fastrl.envs.identity), the bench's masked solve task."""

from __future__ import annotations

import numpy as np
import pytest

from fastrl.envs.contract import check_env
from fastrl.envs.identity import MaskedIdentity
from fastrl.envs.source import EnvSource


def test_one_seed_gives_one_episode_and_the_state_is_always_legal():
    a, b = MaskedIdentity(), MaskedIdentity()
    obs_a, _ = a.reset(seed=7)
    obs_b, _ = b.reset(seed=7)
    for t in range(100):
        assert obs_a == obs_b
        legal = a.action_masks()
        assert legal[obs_a] and legal.sum() == 20  # 60 of 80 illegal, never the state
        np.testing.assert_array_equal(legal, b.action_masks())
        wrong = int(np.flatnonzero(legal)[0] if np.flatnonzero(legal)[0] != obs_a
                    else np.flatnonzero(legal)[1])
        obs_a, reward, terminated, truncated, _ = a.step(obs_a if t % 2 else wrong)
        obs_b, *_ = b.step(obs_b if t % 2 else wrong)
        assert reward == (1.0 if t % 2 else 0.0) and not terminated
        assert truncated == (t == 99)


def test_it_keeps_fastrl_s_env_contract_with_its_mask_in_the_observations():
    source = EnvSource("fastrl.envs.identity:MaskedIdentity-v0")
    env = source.make_one()
    assert set(env.observation_space.spaces) == {"observation", "action_mask"}
    check_env(source, seed=3, steps=250)


def test_too_many_illegal_actions_are_refused():
    with pytest.raises(ValueError, match="n_invalid=8: must be in 0..7"):
        MaskedIdentity(dim=8, n_invalid=8)
