"""Observation normalisation and reward scaling (algo.normalize_obs, algo.normalize_reward)
through real runs: the learner folds every trained batch into their statistics, which the
checkpoint holds and --resume continues."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config as config

from fastrl import Trainer

pytestmark = pytest.mark.timeout(300)

NORM = "_features.norm."


def learner_state(checkpoint) -> dict:
    return torch.load(Path(checkpoint) / "learner.pt", weights_only=True)


def statistics(checkpoint) -> dict[str, torch.Tensor]:
    model = learner_state(checkpoint)["model"]
    return {k.removeprefix(NORM): v for k, v in model.items() if k.startswith(NORM)}


def test_the_learner_updates_both_statistics_and_resume_continues_them(tmp_path,
                                                                      no_shm_residue):
    cfg = config(tmp_path, "algo.normalize_obs=true", "algo.normalize_reward=true",
                 "algo.total_steps=2048",
                 "algo.target_return=null", "log.eval_every_steps=100000")
    first = Trainer(cfg).fit()
    stats = statistics(first.checkpoint)
    assert stats["count"].item() == pytest.approx(first.global_step, abs=0.01)
    # CartPole's velocities spread wider than its angle: the variances are the data's
    assert stats["var"][1] > 10 * stats["var"][2] and (stats["mean"] != 0).all()
    # CartPole pays 1 a step: discounted returns spread, and every trained step was counted
    returns = learner_state(first.checkpoint)["reward_scale"]
    assert returns["count"].item() == pytest.approx(first.global_step, abs=0.01)
    # (an env whose episode ended on the run's last step holds a return of 0)
    assert returns["var"].item() > 1 and (returns["returns"] >= 0).all() and \
        returns["returns"].max() > 1

    resumed = Trainer.resume(first.run_dir, ["algo.total_steps=4096"]).fit()
    assert resumed.global_step == 4096
    assert statistics(resumed.checkpoint)["count"].item() == pytest.approx(4096, abs=0.01)
    returns = learner_state(resumed.checkpoint)["reward_scale"]["count"]
    assert returns.item() == pytest.approx(4096, abs=0.01)
