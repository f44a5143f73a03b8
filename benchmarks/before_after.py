"""One change measured end to end against the code before it, alternating, in one run.

    python benchmarks/before_after.py BASE_REV [--rounds 3]

Checks ``BASE_REV`` out into a temporary git worktree and runs, for it and for this
checkout in turn (the order flips every round, so a noisy machine slows both alike):

- the default solve, ``python -m fastrl.train configs/cartpole_ppo.yaml``: wall seconds
  and env steps until the target return;
- ``python -m fastrl.bench --scenario train,train-appo --peers "" --workers 2``: PPO's and
  APPO's end-to-end training throughput (steps/s, median of the bench's own repeats);
- ``python -m fastrl.bench --scenario collect-policy --env mpe2.simple_spread_v3 --peers ""
  --workers 2 --envs-per-worker 24``: a multi-agent collect (PettingZoo's MPE, one row per
  agent, padding weighted out), steps/s.

Each side imports its own ``fastrl`` (PYTHONPATH) in this venv. Prints the medians of both
sides and their ratios (after/before).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
QUIET = ["log.tensorboard=false", "log.console=false"]


def solve(source: Path, runs: Path) -> dict[str, float]:
    """Wall seconds and env steps of the default solve with the fastrl in ``source``."""
    name = f"solve-{time.monotonic_ns()}"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fastrl.train", "configs/cartpole_ppo.yaml", *QUIET,
                    f"log.run_dir={runs}", f"log.run_name={name}"], check=True, cwd=source,
                   env={**os.environ, "PYTHONPATH": str(source)}, capture_output=True)
    seconds = time.perf_counter() - start
    steps = torch.load(runs / name / "model.pt", weights_only=True)["global_step"]
    return {"solve_s": seconds, "solve_steps": float(steps)}


def throughput(source: Path, out: Path) -> dict[str, float]:
    """PPO's and APPO's training steps/s (the bench's medians, its report in the folder
    ``out``) with the fastrl in ``source``."""
    subprocess.run([sys.executable, "-m", "fastrl.bench", "--scenario", "train,train-appo",
                    "--peers", "", "--workers", "2", "--no-plot", "--out", str(out)],
                   check=True, cwd=source, env={**os.environ, "PYTHONPATH": str(source)},
                   capture_output=True)
    doc = json.loads((out / "bench.json").read_text())
    return {f"{r['scenario']}_steps_per_s": r["steps_per_sec"] for r in doc["medians"]}


def multi_agent_collect(source: Path, out: Path) -> dict[str, float]:
    """Steps/s of a multi-agent collect (MPE simple_spread, 3 agents: 8 envs x 3 rows a
    worker) with the fastrl in ``source``."""
    subprocess.run([sys.executable, "-m", "fastrl.bench", "--scenario", "collect-policy",
                    "--env", "mpe2.simple_spread_v3", "--envs-per-worker", "24", "--peers", "",
                    "--workers", "2", "--no-plot", "--out", str(out)],
                   check=True, cwd=source, env={**os.environ, "PYTHONPATH": str(source)},
                   capture_output=True)
    doc = json.loads((out / "bench.json").read_text())
    return {"multi_agent_collect_steps_per_s": doc["medians"][0]["steps_per_sec"]}


def main() -> None:
    """Set up the worktree, alternate the two sides, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fastrl-before-after-") as tmp:
        tmp = Path(tmp)
        before = tmp / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(before), args.base],
                       check=True, cwd=ROOT, capture_output=True)
        try:
            sides = {"before": before, "after": ROOT}
            seen: dict[str, dict[str, list[float]]] = {s: {} for s in sides}
            for i in range(args.rounds):
                for side in (("before", "after") if i % 2 == 0 else ("after", "before")):
                    runs = tmp / f"{side}-{i}"
                    runs.mkdir()
                    found = {**solve(sides[side], runs),
                             **throughput(sides[side], runs / "bench"),
                             **multi_agent_collect(sides[side], runs / "bench-ma")}
                    for key, value in found.items():
                        seen[side].setdefault(key, []).append(value)
                    print(f"round {i} {side}: " + ", ".join(
                        f"{k}={v:,.1f}" for k, v in found.items()), flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT,
                           capture_output=True)
    print(f"\n{'median of ' + str(args.rounds):28} {'before':>12} {'after':>12} "
          f"{'after/before':>12}")
    for key in seen["before"]:
        b, a = (statistics.median(seen[s][key]) for s in ("before", "after"))
        print(f"{key:28} {b:12,.1f} {a:12,.1f} {a / b:12.2f}")


if __name__ == "__main__":
    main()
