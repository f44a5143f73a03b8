"""SAC's gradient step on the CPU against its matrix products and against SB3's (issue 43):
where HalfCheetah's milliseconds per env step go at the zoo's settings.

    python benchmarks/sac_update.py [--rounds 5] [--seconds 1] [--out FILE.json]

For 1 and 2 torch threads, in alternating rounds, the wall time of:

- ``fastrl``: one ``SAC.update`` (actor, twin critics, entropy coefficient, Polyak targets)
  as fastrl's learner makes it from ``configs/mujoco_sac.yaml`` at the zoo's settings of
  HalfCheetah (batch 256, [256, 256] ReLU networks, lr 3e-4), on a synthetic batch;
- ``matmuls``: the same step's matrix products alone (the forward, and the backward's
  input and weight gradients, of every layer the step runs), recorded from one real step
  and replayed on random operands of the same shapes and layouts: what the step cannot go
  below on this machine;
- ``SB3``: one gradient step of ``SAC.train`` at the zoo's entry (the same settings), on
  one batch sampled once from a replay filled by 1,000 random steps (fastrl's step, too,
  is timed without sampling).

Medians of the rounds, in milliseconds per gradient step. One step is one env step at the
zoo's ratio, so 0.5x SB3's step is the race's goal for the learner alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # (as in learner_cpu.py)

import torch
from learner_cpu import Case, build_update, replay_batch
from shared import seconds_per_call
from torch.utils._python_dispatch import TorchDispatchMode

from fastrl.bench.report import provenance
from fastrl.bench.sb3_solve import make_env, make_model
from fastrl.bench.zoo import ZOO
from fastrl.core.process import learner_torch

ZOO_SETTINGS = Case("mujoco_sac.yaml", ("env.id=HalfCheetah-v5", "algo.replay.batch_size=256",
                                        "algo.sac.q_lr=3e-4", "algo.hidden_sizes=[256,256]"))


#: a matrix product as the step called it: each operand's shape and strides
Product = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]


class MatmulRecorder(TorchDispatchMode):
    """Records every ``mm`` and ``addmm`` torch runs inside it (the forward products of
    the Linear layers and autograd's input and weight gradients) as a :data:`Product`."""

    def __init__(self) -> None:
        super().__init__()
        self.products: list[Product] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
            a, b = args[-2:]  # (addmm's first argument is the bias)
            self.products.append((tuple(a.shape), a.stride(), tuple(b.shape), b.stride()))
        return func(*args, **(kwargs or {}))


def step_products(step: Callable[[], None]) -> list[Product]:
    """Every matrix product one call of ``step`` runs, in order."""
    with MatmulRecorder() as recorder:
        step()
    return recorder.products


def replay_products(products: list[Product]) -> tuple[Callable[[], None], float]:
    """The products alone, on random operands of the same shapes and layouts (a
    transposed weight stays transposed: BLAS's speed depends on it), and their GFLOP."""
    operands = [(torch.empty_strided(sa, ta).normal_(), torch.empty_strided(sb, tb).normal_())
                for sa, ta, sb, tb in products]

    def matmuls() -> None:
        for a, b in operands:
            torch.mm(a, b)

    gflop = sum(2 * sa[0] * sa[1] * sb[1] for sa, _, sb, _ in products) / 1e9
    return matmuls, gflop


def fastrl_steps() -> tuple[Callable[[], None], Callable[[], None], float]:
    """fastrl's SAC step, its matrix products alone, and their GFLOP."""
    update, cfg, plan = build_update(ZOO_SETTINGS, "shipped")
    batch = replay_batch(cfg, plan)

    def step() -> None:
        update.update(batch)

    return step, *replay_products(step_products(step))


def sb3_step() -> Callable[[], None]:
    """One gradient step of SB3's SAC at the zoo's HalfCheetah entry, on one batch sampled
    once from a replay filled by 1,000 random steps: like fastrl's, the step without the
    replay's sampling."""
    entry = ZOO["halfcheetah-sac"]
    model = make_model(entry, make_env(entry, "dummy", seed=1), 1, learning_starts=1000)
    model.learn(total_timesteps=1000)  # random actions into the replay, no update yet
    batch = model.replay_buffer.sample(model.batch_size, env=model._vec_normalize_env)
    model.replay_buffer.sample = lambda *args, **kwargs: batch
    return lambda: model.train(gradient_steps=1, batch_size=model.batch_size)


def main() -> None:
    """Alternate the three over ``--rounds`` at 1 and 2 threads; print and write medians."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=1.0, help="per system and round")
    p.add_argument("--out", type=Path, help="JSON file of every round and median")
    args = p.parse_args()
    fastrl, matmuls, gflop = fastrl_steps()
    systems = {"fastrl": fastrl, "matmuls": matmuls, "SB3": sb3_step()}
    rows = []
    for threads in (1, 2):
        ms: dict[str, list[float]] = {name: [] for name in systems}
        with learner_torch(threads):
            for r in range(args.rounds):
                for name in (list(systems) if r % 2 == 0 else list(systems)[::-1]):
                    ms[name].append(1e3 * seconds_per_call(systems[name], args.seconds))
        med = {name: statistics.median(xs) for name, xs in ms.items()}
        rows.append({"threads": threads, "median_ms": med, "rounds_ms": ms,
                     "fastrl_over_sb3": med["fastrl"] / med["SB3"],
                     "matmul_gflops": gflop / med["matmuls"] * 1e3})
        print(f"{threads} thread(s), ms per gradient step (medians of {args.rounds} rounds): "
              f"fastrl {med['fastrl']:.2f}, its matmuls alone {med['matmuls']:.2f} "
              f"({gflop:.3f} GFLOP at {rows[-1]['matmul_gflops']:.0f} GFLOP/s), "
              f"SB3 {med['SB3']:.2f}; fastrl / SB3 {rows[-1]['fastrl_over_sb3']:.2f}")
    if args.out:
        doc = {**provenance("python benchmarks/sac_update.py"),
               "options": {k: str(v) for k, v in vars(args).items()},
               "gflop_per_step": gflop, "threads": rows}
        args.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
