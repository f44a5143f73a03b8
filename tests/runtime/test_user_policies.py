"""User policies through real worker processes: a BasePolicy subclass trains with PPO and a
plain module with DQN; the run directory alone rebuilds the policy."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import QUICK, QUICK_DQN
from user_policies import TinyActorCritic, q_net

from fastrl.config import load_config
from fastrl.eval.policy import load_policy
from fastrl.models.policy import flat_params
from fastrl.trainer import Trainer

pytestmark = pytest.mark.timeout(300)


def test_base_policy_subclass_trains_with_ppo_through_workers(tmp_path, no_shm_residue):
    cfg = load_config(None, [*QUICK, "algo.total_steps=1024", f"log.run_dir={tmp_path}"])
    result = Trainer(cfg, policy=TinyActorCritic).fit()
    assert result.global_step == 1024 and result.eval is not None
    assert np.isfinite(result.metrics["policy_loss"])
    # the run directory names the class, so it alone rebuilds the policy
    loaded = load_policy(result.run_dir)
    assert loaded.config.algo.policy == "user_policies:TinyActorCritic"
    assert isinstance(loaded.policy, TinyActorCritic)
    assert loaded.policy.actor[-1].weight.abs().sum() > 0, "the zero-initialised head moved"


def test_plain_module_trains_with_dqn_through_workers(tmp_path, no_shm_residue):
    module = q_net(2)
    initial = flat_params(module)
    cfg = load_config(None, [*QUICK, *QUICK_DQN, "algo.total_steps=1024",
                             f"log.run_dir={tmp_path}"])
    result = Trainer(cfg, policy=module).fit()
    assert result.global_step == 1024 and result.eval is not None
    assert np.isfinite(result.metrics["q_loss"])
    trained = flat_params(load_policy(result.run_dir, policy=module).policy)
    assert trained.shape == initial.shape and not np.array_equal(trained, initial)
    assert np.array_equal(flat_params(module), initial), "the caller's module was trained"

