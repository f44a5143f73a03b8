"""benchmarks/sac_update.py's list of a SAC step's matrix products, against what torch
counts when the step runs."""

import sys
from pathlib import Path

from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from learner_cpu import Case, build_update, replay_batch  # noqa: E402
from sac_update import step_matmuls  # noqa: E402


def test_the_listed_matmuls_are_every_flop_of_the_step():
    case = Case("mujoco_sac.yaml", ("env.id=Pendulum-v1", "algo.replay.batch_size=32",
                                    "algo.hidden_sizes=[16,8]"))
    update, cfg, plan = build_update(case, "shipped")
    with FlopCounterMode(display=False) as counter:
        update.update(replay_batch(cfg, plan))
    listed = sum(2 * n * k * m for n, k, m in step_matmuls(update, 32))
    assert listed == counter.get_total_flops()
