"""The learner's update on the CPU (issue 31): the MLPs (PPO on CartPole and Hopper, SAC on
HalfCheetah) and the Nature CNN (PPO on Breakout), each with the options that might speed
it up, beside Stable-Baselines3's training throughput on the same task, in the same run.

    python benchmarks/learner_cpu.py [--cases cartpole-ppo,hopper-ppo,halfcheetah-sac,...]
                                     [--rounds 3] [--seconds 4] [--out FILE.json]

fastrl's side is its own update (fastrl.algos, made as the learner makes it, from the
shipped config) on a synthetic batch valid for the env's spaces (fastrl.bench.learner's
``synthetic_batch``), in the learner's torch setting (``learner_torch``). The variants:

- ``shipped``: as the learner runs it (``infra.learner_threads=1``; PPO's MLP steps in
  numpy, fastrl.models.numpy_grad; a CNN's convolutions in channels-last memory);
- ``autograd`` (PPO's MLPs): the same update through torch's autograd, as every other
  policy trains; the variants below are of the autograd path:
- ``2 threads``: two intra-op threads;
- ``compile``: ``torch.compile`` of the networks' forward passes;
- ``bf16``: ``torch.autocast("cpu", torch.bfloat16)`` around the update;
- ``contiguous`` (the CNN): its weights in torch's default memory format.

SB3's side is its ``train()`` with the RL Baselines3 Zoo's hyper-parameters of the task
(fastrl.bench.sb3_solve), timed around each call during a real ``learn()``. The figure is
samples trained per CPU-second of the process (a sample: one transition in one gradient
step; PPO's batch times its epochs, SAC's batch size per step), so that a variant using
two threads pays for both. Variants and SB3 run in alternating rounds; medians.

``cartpole-ppo`` is the same work on both sides (minibatches of 256 transitions, 64x64 tanh
networks); the ``floor`` line is the update's arithmetic floor: every FLOP of its matmuls
at the peak of a large matmul on this machine (6 FLOPs per weight per sample).

**Not the same work** in the other cases. Each side trains at its own settings: fastrl at
its config's minibatch size, epochs and network, SB3 at the zoo's (Hopper PPO: minibatches of 256
transitions and [64, 64] tanh networks against the zoo's 32 and [256, 256] ReLU; HalfCheetah
SAC: batches of 128, q lr 1e-3, against SB3's 256 and 3e-4). A sample costs less in a
larger minibatch and a smaller network, so the
SB3 line is a reference for what each system's own settings cost per CPU-second, not a
race of the two learners; the bench's equal-settings races (``--scenario solve``, docs/
bench.md) are that.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# numpy's BLAS on one thread, as in fastrl's processes (fastrl.core.forkserver); before
# numpy is first imported, when OpenBLAS reads it
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import torch
from gymnasium.vector.utils import batch_space

from fastrl.bench.learner import synthetic_batch
from fastrl.bench.report import provenance
from fastrl.bench.sb3_solve import make_env, make_model
from fastrl.bench.zoo import ZOO
from fastrl.config import MainConfig, load_config
from fastrl.core.process import learner_torch
from fastrl.models.encoders import channels_last_convs
from fastrl.plan import RunPlan, plan_run

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@dataclass(frozen=True)
class Case:
    """A task: fastrl's config (and overrides) and the SB3 zoo entry of the same task."""

    config: str
    overrides: tuple[str, ...]
    cnn: bool = False


CASES = {
    # the same minibatch (256) and network (64x64 tanh) as the zoo's entry: the same work
    "cartpole-ppo": Case("cartpole_ppo.yaml", ()),
    "hopper-ppo": Case("mujoco_ppo.yaml", ("env.id=Hopper-v5",)),
    "halfcheetah-sac": Case("mujoco_sac.yaml", ("env.id=HalfCheetah-v5",)),
    "breakout-ppo": Case("atari_ppo.yaml", ("env.id=ALE/Breakout-v5",), cnn=True),
}


def build_update(case: Case, variant: str) -> tuple[Any, MainConfig, RunPlan]:
    """fastrl's update object for ``case`` under ``variant``, made as the learner makes
    it, with the config and plan it was made from."""
    cfg = load_config(CONFIGS / case.config, list(case.overrides))
    plan = plan_run(cfg)
    policy = plan.policy() if variant == "contiguous" else channels_last_convs(plan.policy())
    update = cfg.algo.algorithm.make_update(cfg.algo, policy, plan.obs_space, plan.act_space,
                                            torch.device("cpu"))
    if variant != "shipped" and getattr(update, "_numpy", None) is not None:
        update._numpy = None  # the autograd path
    if "compile" in variant:
        _compile_forwards(update)
    return update, cfg, plan


def replay_batch(cfg: MainConfig, plan: RunPlan) -> dict[str, torch.Tensor]:
    """A random replay batch of ``algo.replay.batch_size`` valid for the plan's spaces."""
    size = cfg.algo.replay.batch_size
    obs, act = (torch.as_tensor(np.asarray(batch_space(space, size).sample(), np.float32))
                for space in (plan.obs_space, plan.act_space))
    return {"obs": obs, "next_obs": obs.clone(), "action": act,
            "reward": torch.randn(size), "done": torch.zeros(size),
            "discount": torch.full((size,), cfg.algo.gamma), "weights": torch.ones(size)}


def fastrl_update(case: Case, variant: str) -> tuple[Callable[[], None], int]:
    """One call of fastrl's update for ``case`` under ``variant``, and the samples it
    trains."""
    update, cfg, plan = build_update(case, variant)
    if cfg.algo.algorithm.data.on_policy:
        batch = synthetic_batch(
            plan, cfg.batch_size // (cfg.infra.rollout_len * cfg.infra.envs_per_worker))
        samples = cfg.batch_size * cfg.algo.update_epochs
        return (lambda: update.update(batch, cfg.algo.lr, 0)), samples
    batch = replay_batch(cfg, plan)
    return (lambda: update.update(batch)), cfg.algo.replay.batch_size


def _compile_forwards(update) -> None:
    """``torch.compile`` each network's forward (PPO's policy, SAC's actor and critics)."""
    for name in ("policy", "actor", "critic", "target"):
        net = getattr(update, name, None)
        if net is not None:
            net.forward = torch.compile(net.forward)
            for method in ("evaluate", "value", "sample"):
                if hasattr(net, method):
                    setattr(net, method, torch.compile(getattr(net, method)))


def time_fastrl(case: Case, variant: str, seconds: float) -> float:
    """Samples per CPU-second of fastrl's update under ``variant``."""
    threads = 2 if variant == "2 threads" else 1
    with learner_torch(threads):
        step, samples = fastrl_update(case, variant)
        autocast = torch.autocast("cpu", torch.bfloat16) if variant == "bf16" \
            else contextlib.nullcontext()
        with autocast:
            step()  # warm-up (and compilation)
            step()
            cpu0, wall0, n = time.process_time(), time.perf_counter(), 0
            while time.perf_counter() - wall0 < seconds:
                step()
                n += 1
            return n * samples / (time.process_time() - cpu0)


def time_sb3(task: str, seconds: float) -> float:
    """Samples per CPU-second of SB3's ``train()`` on ``task``'s zoo entry, measured over
    the calls of a ``learn()`` that lasts about ``seconds`` of training."""
    entry = ZOO[task]
    env = make_env(entry, "dummy", seed=1)
    model = make_model(entry, env, 1, **({"learning_starts": 1000} if entry.algo == "SAC"
                                         else {}))
    train, spent = model.train, {"cpu": 0.0, "samples": 0}

    def timed_train(*args, **kw):
        cpu0 = time.process_time()
        train(*args, **kw)
        spent["cpu"] += time.process_time() - cpu0
        if entry.algo == "SAC":
            spent["samples"] += model.batch_size * (kw.get("gradient_steps") or args[0])
        else:
            spent["samples"] += model.n_steps * model.n_envs * model.n_epochs

    model.train = timed_train

    from stable_baselines3.common.callbacks import BaseCallback

    class Enough(BaseCallback):
        def _on_step(self) -> bool:
            return spent["cpu"] < seconds

    model.learn(total_timesteps=10**7, callback=Enough())
    env.close()
    return spent["samples"] / spent["cpu"]


def matmul_flops_per_cpu_second(n: int = 512, seconds: float = 1.0) -> float:
    """What one thread of this machine does: FLOPs per CPU-second of a square float32
    matmul, large enough to run at the BLAS's peak."""
    with learner_torch(1):
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b
        cpu0, wall0, k = time.process_time(), time.perf_counter(), 0
        while time.perf_counter() - wall0 < seconds:
            a @ b
            k += 1
        return 2 * n**3 * k / (time.process_time() - cpu0)


def floor_samples_per_cpu_second(case: Case, flops: float) -> float | None:
    """The arithmetic floor of an actor-critic MLP's PPO update: samples per CPU-second if
    every FLOP of its matmuls (forward, and twice that backward: 6 per weight) ran at the
    matmul peak ``flops``; None for a CNN, and for SAC, whose step also runs the target
    critics and the actor through the critics (the acting policy's weights miss those)."""
    cfg = load_config(CONFIGS / case.config, list(case.overrides))
    if case.cnn or not cfg.algo.algorithm.data.on_policy:
        return None
    weights = sum(p.numel() for p in plan_run(cfg).policy().parameters() if p.dim() == 2)
    return flops / (6 * weights)


def main() -> None:
    """Alternate the variants and SB3 over ``--rounds``; print medians and ratios, and
    write them with the machine's facts to ``--out``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--out", type=Path, help="JSON file of every round, median and ratio")
    args = p.parse_args()
    cases = {name: measure_case(name, args.rounds, args.seconds)
             for name in args.cases.split(",")}
    if args.out:
        doc = {**provenance("python benchmarks/learner_cpu.py"),
               "options": {k: str(v) for k, v in vars(args).items()},
               "cases": cases}
        args.out.write_text(json.dumps(doc, indent=2) + "\n")


def measure_case(name: str, rounds: int, seconds: float) -> dict:
    """One case's rounds, printed: the floor, and each variant's and SB3's median samples
    per CPU-second with its ratio to ``shipped`` (``failed`` says why a variant cannot
    run)."""
    case = CASES[name]
    on_policy = load_config(CONFIGS / case.config).algo.algorithm.data.on_policy
    variants = ["shipped", *(["autograd"] if on_policy and not case.cnn else []),
                "2 threads", "compile", "bf16", *(["contiguous"] if case.cnn else [])]
    runs: dict[str, list[float]] = {v: [] for v in [*variants, "SB3"]}
    failed: dict[str, str] = {}
    for r in range(rounds):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            try:
                runs[v].append(time_fastrl(case, v, seconds))
            except Exception as e:  # a variant the update does not support: say why
                runs[v].append(math.nan)
                failed[v] = f"{type(e).__name__}: {str(e).splitlines()[0][:90]}"
        runs["SB3"].append(time_sb3(name, seconds))
    base = statistics.median(runs["shipped"])
    floor = floor_samples_per_cpu_second(case, matmul_flops_per_cpu_second())
    same = name == "cartpole-ppo"
    print(f"\n{name}: samples trained per CPU-second (medians of {rounds} rounds; " +
          ("the same minibatch and network)" if same else
           "each system at its own minibatch size, epochs and network: not the same work)"))
    if floor is not None:
        print(f"  {'floor':14s} {floor:12,.0f}   {floor / base:5.2f}x shipped   "
              "(every matmul FLOP at this machine's matmul peak)")
    rows = []
    for v, xs in runs.items():
        m = statistics.median(xs)
        rows.append({"variant": v, "median": None if v in failed else m,
                     "ratio": None if v in failed else m / base,
                     "rounds": [None if math.isnan(x) else x for x in xs],
                     "failed": failed.get(v)})
        if v in failed:
            print(f"  {v:14s} fails: {failed[v]}")
            continue
        print(f"  {v:14s} {m:12,.0f}   {m / base:5.2f}x shipped   "
              f"rounds: {', '.join(f'{x:,.0f}' for x in xs)}")
    return {"same_work": same, "floor": floor, "variants": rows}


if __name__ == "__main__":
    main()
