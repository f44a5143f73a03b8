"""Planning a run (fastrl.plan): the learner's device choice, the networks the shipped
off-policy configs plan."""

from __future__ import annotations

import pytest
import torch
from helpers import CONFIGS

from fastrl.config import ConfigError, load_config
from fastrl.models.qnet import QNetwork
from fastrl.models.sac import SquashedGaussianActor
from fastrl.plan import plan_run, resolve_device


def test_device_auto_falls_back_to_cpu_and_cuda_must_exist():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto") == expected
    assert resolve_device("cpu") == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="infra.device=cuda"):
            resolve_device("cuda")



@pytest.mark.parametrize("name,policy", [("cartpole_dqn", QNetwork),
                                         ("pendulum_sac", SquashedGaussianActor)])
def test_shipped_off_policy_configs_plan_the_right_networks(name, policy):
    cfg = load_config(CONFIGS / f"{name}.yaml")
    plan = plan_run(cfg)
    assert isinstance(plan.policy(), policy)
    assert plan.num_params == sum(p.numel() for p in plan.policy().parameters())



def test_a_mask_of_actions_it_cannot_mask_is_refused_when_planned(tmp_path):
    from fastrl.models.encoders import UnsupportedObservations

    # SAC's networks never read the mask, but its actors would: refused before any start
    cfg = load_config(None, ["env.id=scripted_envs:BoxMasked-v0", "algo.name=sac",
                             f"log.run_dir={tmp_path}"])
    with pytest.raises(UnsupportedObservations, match="masks Discrete actions"):
        plan_run(cfg)
