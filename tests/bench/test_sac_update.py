"""benchmarks/sac_update.py's matmuls-alone baseline: the matrix products it records from a
real SAC step are every matmul FLOP torch counts in that step, and it replays them at the
recorded shapes and layouts."""

from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_recorded_products_are_every_matmul_flop_of_a_step(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")  # (what the scripts set; undone after)
    from learner_cpu import Case, build_update, replay_batch
    from sac_update import replay_products, step_products

    case = Case("mujoco_sac.yaml", ("env.id=Pendulum-v1", "algo.replay.batch_size=32",
                                    "algo.hidden_sizes=[16,8]"))
    update, cfg, plan = build_update(case, "shipped")
    batch = replay_batch(cfg, plan)
    with FlopCounterMode(display=False) as counter:
        update.update(batch)
    products = step_products(lambda: update.update(batch))
    _, gflop = replay_products(products)
    assert round(gflop * 1e9) == counter.get_total_flops()
    # the backward's weight gradients multiply transposed operands: kept as recorded
    assert any(not a.is_contiguous() or not b.is_contiguous() for a, b in (
        (torch.empty_strided(sa, ta), torch.empty_strided(sb, tb))
        for sa, ta, sb, tb in products))
