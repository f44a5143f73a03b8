"""A2C solves CartPole-v1 with the default config (algo.name=a2c), to test_solve's bar."""

from __future__ import annotations

import pytest
from helpers import assert_solved

from fastrl.config import load_config
from fastrl.trainer import Trainer

pytestmark = pytest.mark.slow


@pytest.mark.timeout(600)
def test_a2c_solves_cartpole_with_the_default_config(tmp_path, no_shm_residue):
    cfg = load_config(None, ["algo.name=a2c", f"log.run_dir={tmp_path}", "log.console=false"])
    result = Trainer(cfg).fit()
    print(f"a2c: solved at {result.global_step} env steps in {result.wall_s:.1f} s, "
          f"eval {result.eval}")
    assert_solved(cfg, result.global_step, result.eval, result.run_dir)
