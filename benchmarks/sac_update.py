"""SAC's gradient step on the CPU against its matrix products and against SB3's (issue 43):
where HalfCheetah's milliseconds per env step go at the zoo's settings.

    python benchmarks/sac_update.py [--rounds 5] [--seconds 1] [--out FILE.json]

For 1 and 2 torch threads, in alternating rounds, the wall time of:

- ``fastrl``: one ``SAC.update`` (actor, twin critics, entropy coefficient, Polyak targets)
  as fastrl's learner makes it from ``configs/mujoco_sac.yaml`` at the zoo's settings of
  HalfCheetah (batch 256, [256, 256] ReLU networks, lr 3e-4), on a synthetic batch;
- ``matmuls``: the same step's matrix products alone, at their shapes (the forward, and the
  backward's input and weight gradients, of every layer the step runs), on random
  matrices: what the step cannot go below on this machine;
- ``SB3``: one gradient step of ``SAC.train`` at the zoo's entry (the same settings), its
  replay filled by 1,000 random steps.

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
from learner_cpu import Case, build_update, linears, replay_batch, seconds_per_call

from fastrl.bench.report import provenance
from fastrl.bench.sb3_solve import make_env, make_model
from fastrl.bench.zoo import ZOO
from fastrl.core.process import learner_torch

ZOO_SETTINGS = Case("mujoco_sac.yaml", ("env.id=HalfCheetah-v5", "algo.replay.batch_size=256",
                                        "algo.sac.q_lr=3e-4", "algo.hidden_sizes=[256,256]"))


def step_matmuls(update, batch: int) -> list[tuple[int, int, int]]:
    """(n, k, m) of every matrix product of one SAC step: ``[n, k] @ [k, m]``.

    A layer's forward is ``[B, in] @ [in, out]``; its backward's input gradient
    ``[B, out] @ [out, in]`` and weight gradient ``[in, B] @ [B, out]``. The step runs the
    actor forward twice (next and current observations) and backward once (weights; inputs
    but the first layer's); each critic forward three times (target, loss, actor's loss),
    backward once for its weights (inputs but the first layer's) and once to the actions
    (every layer's input gradient, no weights)."""
    out: list[tuple[int, int, int]] = []

    def shapes_of(net: torch.nn.Module) -> list[tuple[int, int]]:
        return [(m.in_features, m.out_features) for m in linears(net)]

    def passes(shapes, forwards, weight_grads, input_grads, first_input):
        for j, (i, o) in enumerate(shapes):
            out.extend([(batch, i, o)] * forwards + [(i, batch, o)] * weight_grads)
            out.extend([(batch, o, i)] * (input_grads - (j == 0 and not first_input)))

    passes(shapes_of(update.actor), 2, 1, 1, False)
    for critic in (update.critic.q1, update.critic.q2):
        shapes = shapes_of(critic)
        passes(shapes, 3, 1, 1, False)  # target, loss, actor's loss; the loss's backward
        passes(shapes, 0, 0, 1, True)  # the actor loss's backward to the actions
    return out


def fastrl_steps() -> tuple[Callable[[], None], Callable[[], None], float]:
    """fastrl's SAC step, its matrix products alone, and their GFLOP."""
    update, cfg, plan = build_update(ZOO_SETTINGS, "shipped")
    batch = replay_batch(cfg, plan)
    shapes = step_matmuls(update, cfg.algo.replay.batch_size)
    mats = [(torch.randn(n, k), torch.randn(k, m)) for n, k, m in shapes]

    def matmuls() -> None:
        for a, b in mats:
            a @ b

    return (lambda: update.update(batch)), matmuls, \
        sum(2 * n * k * m for n, k, m in shapes) / 1e9


def sb3_step() -> Callable[[], None]:
    """One gradient step of SB3's SAC at the zoo's HalfCheetah entry, its replay filled."""
    entry = ZOO["halfcheetah-sac"]
    model = make_model(entry, make_env(entry, "dummy", seed=1), 1, learning_starts=1000)
    model.learn(total_timesteps=1000)  # random actions into the replay, no update yet
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
