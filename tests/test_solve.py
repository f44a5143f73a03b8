"""The default config solves CartPole-v1 through the full multi-process pipeline, with PPO
and with APPO (the same config, algo.name=appo)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fastrl.config import MainConfig, load_config
from fastrl.envs.source import EnvSource
from fastrl.eval.harness import evaluate
from fastrl.plan import plan_run
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
    assert_solved(cfg, result.global_step, result.eval, result.run_dir)


def assert_solved(cfg: MainConfig, global_step: int, final_eval: dict, run_dir: Path) -> None:
    """The solve bar: within 500k steps, the learner's last evaluation (20 episodes, fixed
    seeds, deterministic policy: fastrl.eval.harness.evaluate) and the saved model evaluated
    afresh here both average at least 475."""
    assert global_step <= 500_000
    assert final_eval["return_mean"] >= 475
    policy = plan_run(cfg).policy()
    policy.load_state_dict(torch.load(run_dir / "model.pt")["model"])
    seeds = list(range(cfg.log.eval_seed, cfg.log.eval_seed + 20))
    assert evaluate(policy, EnvSource("CartPole-v1"), seeds)["return_mean"] >= 475
