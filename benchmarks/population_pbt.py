"""PBT against the same population with fixed settings (issue 44), over seeds.

    python benchmarks/population_pbt.py [--seeds 1,2,3] [--steps 40000] [--out FILE.json]

A population of 8 members of CartPole's shipped PPO config whose learning rates span two
orders of magnitude (``LRS``, some too small to learn in the budget, some too large to
stay stable: the setting that matters, and whose best value changes as the policy
improves), trained ``--steps`` member env steps twice per seed: with those settings fixed,
and with PBT (``population.pbt.every_steps=5000``, the bottom quarter copying the top
quarter and perturbing lr by 0.8 or 1.25: settings chosen before any run, not tuned).
Each run ends with the evaluation of every member on the config's seed suite (20
episodes each); the figures are the members' mean return, their IQM with its 95%
stratified-bootstrap interval, and the worst and best member, per run and side. Runs
alternate sides; each is a ``python -m fastrl.train`` process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from fastrl.bench.report import provenance

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "cartpole_ppo.yaml"
LRS = [1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2]
SIDES = {"fixed": [], "pbt": ["population.pbt.every_steps=5000"]}
FIGURES = ("return_mean", "iqm_return", "iqm_return_ci_low", "iqm_return_ci_high",
           "worst_return_mean", "best_return_mean")


def run(side: str, seed: int, steps: int, work: Path) -> dict[str, float]:
    """One population run of ``side``; its final evaluation's figures."""
    name = f"{side}-s{seed}"
    cmd = [sys.executable, "-m", "fastrl.train", str(CONFIG), f"seed={seed}",
           f"population.size={len(LRS)}", f"population.vary={{algo.lr: {LRS}}}",
           f"algo.total_steps={steps}", "algo.target_return=null", "log.console=false",
           "log.tensorboard=false", f"log.eval_every_steps={10 * steps}",
           f"log.run_dir={work}", f"log.run_name={name}", *SIDES[side]]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"{name} failed:\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {k: result["eval"][k] for k in FIGURES} | {"wall_s": result["wall_s"]}


def main() -> None:
    """Run both sides on every seed, alternating; print and write the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--steps", type=int, default=40_000, help="member env steps a run")
    p.add_argument("--out", type=Path, help="JSON file of every run")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="fastrl-pbt-") as tmp:
        for i, seed in enumerate(seeds):
            for side in (list(SIDES) if i % 2 == 0 else list(SIDES)[::-1]):
                figures = run(side, seed, args.steps, Path(tmp))
                runs.append({"side": side, "seed": seed, **figures})
                print(f"{side:5s} seed {seed}: mean {figures['return_mean']:6.1f}  IQM "
                      f"{figures['iqm_return']:6.1f} [{figures['iqm_return_ci_low']:.1f}, "
                      f"{figures['iqm_return_ci_high']:.1f}]  worst "
                      f"{figures['worst_return_mean']:6.1f}  best "
                      f"{figures['best_return_mean']:6.1f}", flush=True)
    summary = {side: {k: statistics.median(r[k] for r in runs if r["side"] == side)
                      for k in (*FIGURES, "wall_s")} for side in SIDES}
    wins = sum(next(r["iqm_return"] for r in runs if r["side"] == "pbt" and r["seed"] == s) >
               next(r["iqm_return"] for r in runs if r["side"] == "fixed" and r["seed"] == s)
               for s in seeds)
    print(f"medians over seeds {args.seeds}: " + "; ".join(
        f"{side} IQM {m['iqm_return']:.1f}, mean {m['return_mean']:.1f}, worst "
        f"{m['worst_return_mean']:.1f}" for side, m in summary.items()))
    print(f"PBT's IQM above the fixed population's on {wins} of {len(seeds)} seeds")
    if args.out:
        doc = {**provenance("python benchmarks/population_pbt.py"),
               "options": {k: str(v) for k, v in vars(args).items()}, "lrs": LRS,
               "sides": {k: " ".join(v) for k, v in SIDES.items()}, "runs": runs,
               "medians": summary, "pbt_wins": wins, "seeds": seeds}
        args.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
