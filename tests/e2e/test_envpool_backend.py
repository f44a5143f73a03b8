"""EnvPool as an env backend end to end: on MuJoCo's Hopper it gives the returns the
Gymnasium backend gives for the same fixed policies, and a run with
``env.backend=envpool`` trains through ``python -m fastrl.train``."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import CONFIGS, train_main

from fastrl.config import load_config
from fastrl.envs.source import env_source


def episode_returns(backend: str, action: float, steps: int = 600) -> np.ndarray:
    """Returns of the episodes 8 Hopper envs end within ``steps`` steps of one constant
    action."""
    cfg = load_config(None, ["env.id=Hopper-v5", f"env.backend={backend}"])
    envs = env_source(cfg.env).make(list(range(100, 108)))
    rows, returns, running = envs._rows, [], np.zeros(8)
    try:
        envs.reset()
        for _ in range(steps):
            envs.step_into(np.full((8, 3), action, np.float32), rows)
            running += rows.reward
            ended = rows.terminated | rows.truncated
            returns += running[ended].tolist()
            running[ended] = 0
    finally:
        envs.close()
    return np.asarray(returns)


@pytest.mark.parametrize("action", [0.0, 0.3])
def test_both_backends_give_a_fixed_policy_the_same_returns(action):
    gym_returns, pool_returns = episode_returns("gymnasium", action), \
        episode_returns("envpool", action)
    assert len(gym_returns) >= 16 and len(pool_returns) >= 16
    # the same dynamics from differently seeded starts: the means agree within noise
    noise = 3 * np.hypot(gym_returns.std() / np.sqrt(len(gym_returns)),
                         pool_returns.std() / np.sqrt(len(pool_returns)))
    assert abs(gym_returns.mean() - pool_returns.mean()) <= noise + 0.02 * gym_returns.mean()


@pytest.mark.timeout(300)
def test_a_run_on_the_envpool_backend_trains(tmp_path, no_shm_residue, capfd):
    proc = train_main([str(CONFIGS / "mujoco_ppo.yaml"), "env.backend=envpool",
                       "algo.total_steps=4096", "infra.rollout_len=64", "log.eval_episodes=1",
                       "log.run_name=run"], tmp_path, capfd)
    assert proc.returncode == 0, proc.stderr
    assert len((tmp_path / "run" / "episodes.csv").read_text().splitlines()) > 10
