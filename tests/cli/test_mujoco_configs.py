"""The shipped MuJoCo configs (configs/mujoco_ppo.yaml, configs/mujoco_sac.yaml) train a
short run through ``python -m fastrl.train``, and MuJoCo's model warning (one per env
compiled) reaches the console at most once per process. (A process of its own: this
pytest process, and the fork server it started, may have shown the warning already.)"""

from __future__ import annotations

import pytest
from helpers import CONFIGS, run_train

# (HalfCheetah's episodes last 1,000 steps: 2 workers x 2 envs end one each by 4,096)
SHORT = {"mujoco_ppo": ["infra.envs_per_worker=4", "algo.total_steps=4096",
                        "infra.rollout_len=64"],
         "mujoco_sac": ["infra.envs_per_worker=2", "algo.total_steps=4096",
                        "algo.replay.learning_starts=3800"]}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("config", sorted(SHORT))
def test_a_mujoco_config_trains_and_warns_once_per_process(config, tmp_path, no_shm_residue):
    proc = run_train([str(CONFIGS / f"{config}.yaml"), "log.eval_episodes=1",
                      "log.run_name=run", *SHORT[config]], tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "run"
    assert (run / "model.pt").exists()
    assert len((run / "episodes.csv").read_text().splitlines()) > 1  # episodes ended
    # HalfCheetah's model warns as each of the 4 worker envs, the evaluation env and the
    # supervisor's probe compile it (Hopper's does not); the supervisor, the 2 workers and
    # the evaluation process show the warning at most once each
    warnings = proc.stderr.count("settotalmass")
    assert (1 <= warnings <= 4) if config == "mujoco_sac" else warnings == 0, proc.stderr
