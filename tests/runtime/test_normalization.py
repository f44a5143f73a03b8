"""Observation normalisation (algo.normalize_obs) through real runs: the learner folds every
trained batch into the statistics, which the checkpoint holds and --resume continues."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config as config

from fastrl import Trainer

pytestmark = pytest.mark.timeout(300)

NORM = "_features.norm."


def statistics(checkpoint) -> dict[str, torch.Tensor]:
    model = torch.load(Path(checkpoint) / "learner.pt", weights_only=False)["model"]
    return {k.removeprefix(NORM): v for k, v in model.items() if k.startswith(NORM)}


def test_the_learner_updates_the_statistics_and_resume_continues_them(tmp_path,
                                                                      no_shm_residue):
    cfg = config(tmp_path, "algo.normalize_obs=true", "algo.total_steps=2048",
                 "algo.target_return=null", "log.eval_every_steps=100000")
    first = Trainer(cfg).fit()
    stats = statistics(first.checkpoint)
    assert stats["count"].item() == pytest.approx(first.global_step, abs=0.01)
    # CartPole's velocities spread wider than its angle: the variances are the data's
    assert stats["var"][1] > 10 * stats["var"][2] and (stats["mean"] != 0).all()

    resumed = Trainer.resume(first.run_dir, ["algo.total_steps=4096"]).fit()
    assert resumed.global_step == 4096
    assert statistics(resumed.checkpoint)["count"].item() == pytest.approx(4096, abs=0.01)
