"""The default config solves CartPole-v1 through the full multi-process pipeline, with PPO
and with APPO (the same config, algo.name=appo)."""

from __future__ import annotations

import pytest
import torch

from fastrl.config import load_config
from fastrl.evaluation import evaluate
from fastrl.plan import plan_run
from fastrl.rollout.envs import EnvSource
from fastrl.trainer import Trainer


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("algo", ["ppo", "appo"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_default_config_solves_cartpole(algo, seed, tmp_path, no_shm_residue):
    cfg = load_config(None, [f"algo.name={algo}", f"seed={seed}", f"log.run_dir={tmp_path}",
                             "log.console=false"])
    result = Trainer(cfg).fit()
    print(f"{algo} seed {seed}: solved at {result.global_step} env steps in {result.wall_s:.1f} s, "
          f"{result.steps_per_sec:.0f} steps/s, eval {result.eval}")
    assert result.global_step <= 500_000
    # 20 episodes, fixed seeds, deterministic policy (fastrl.evaluation.evaluate)
    assert result.eval["return_mean"] >= 475
    # ...and the saved model, evaluated afresh here, meets the same bar.
    policy = plan_run(cfg).policy()
    policy.load_state_dict(torch.load(result.run_dir / "model.pt")["model"])
    seeds = list(range(cfg.log.eval_seed, cfg.log.eval_seed + 20))
    assert evaluate(policy, EnvSource("CartPole-v1"), seeds)["return_mean"] >= 475
