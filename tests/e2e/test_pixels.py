"""Learning from pixels end to end (issue 18): PPO and APPO with the Nature CNN, chosen by
``algo.encoder=auto`` for the uint8 frames of the built-in numba Catch (random play scores
about -0.6, a perfect policy 1), reach a deterministic evaluation of 0.8 within their step
budgets on 2 cores; in trial runs, evaluated every 2,048 steps, they got there at 6,656
(APPO) and 8,704 (PPO) steps, 7-9 s. DQN (at 15-20k steps, 30-60 s) and PPO with the IMPALA
CNN (at 5,632 steps, 43 s) got there too; here they train on frames through the whole
pipeline for a few updates (their minute of learning each did not fit the suite's 15
minutes). The shipped Atari configs run a game through the whole pipeline."""

from __future__ import annotations

import pytest
from helpers import CONFIGS

from fastrl.config import load_config
from fastrl.trainer import Trainer

pytestmark = pytest.mark.slow

BUDGETS = {"ppo": 40_000, "appo": 40_000}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("algo, encoder", [("ppo", "auto"), ("appo", "auto")])
def test_a_cnn_policy_learns_catch_from_frames(algo, encoder, tmp_path, no_shm_residue):
    cfg = load_config(None, [
        "env.id=fastrl/Catch-v0", f"algo.name={algo}", f"algo.encoder={encoder}",
        "algo.hidden_sizes=[]", "algo.target_return=0.8", f"algo.total_steps={BUDGETS[algo]}",
        "log.eval_every_steps=2048", "log.eval_episodes=20", "log.console=false",
        f"log.run_dir={tmp_path}"])
    result = Trainer(cfg).fit()
    print(f"{algo} ({encoder}) on Catch: {result.global_step} steps, {result.wall_s:.0f} s, "
          f"eval {result.eval['return_mean']:.2f}")
    assert result.eval["return_mean"] >= 0.8, result.eval


@pytest.mark.timeout(300)
@pytest.mark.parametrize("overrides, steps", [
    # two updates, of 256 frames: an IMPALA CNN update costs seconds on 2 cores
    (["algo.encoder=impala", "infra.rollout_len=32"], 512),
    (["algo.name=dqn", "algo.replay.learning_starts=256", "algo.replay.batch_size=32"], 1024),
], ids=["ppo-impala", "dqn"])
def test_cnn_policies_train_on_frames_end_to_end(overrides, steps, tmp_path, no_shm_residue):
    cfg = load_config(None, [
        "env.id=fastrl/Catch-v0", "algo.hidden_sizes=[]", *overrides,
        "algo.target_return=null", f"algo.total_steps={steps}", "log.eval_episodes=2",
        "log.console=false", f"log.run_dir={tmp_path}"])
    result = Trainer(cfg).fit()
    assert result.global_step >= steps and result.checkpoint is not None
    assert result.eval["episodes"] == 2  # evaluated with the trained CNN


@pytest.mark.timeout(600)
@pytest.mark.parametrize("config", ["atari_ppo", "atari_appo"])
def test_the_atari_configs_train_on_frames_end_to_end(config, tmp_path, no_shm_residue):
    # Two batches of 1,024 frames, more than one update: each update of the Nature CNN
    # costs seconds on 2 cores, and a third batch takes no new path through the pipeline.
    cfg = load_config(CONFIGS / f"{config}.yaml", [
        "algo.total_steps=2048", "log.eval_episodes=1", "env.atari.noop_max=0",
        "log.console=false", f"log.run_dir={tmp_path}"])
    result = Trainer(cfg).fit()
    assert result.global_step >= 2048 and result.checkpoint is not None
    assert result.eval["episodes"] == 1 and result.eval["length_mean"] > 100
