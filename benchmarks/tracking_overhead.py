"""What W&B and MLflow tracking (issue 45) costs a run: the default job
(``configs/cartpole_ppo.yaml``) trained for a fixed ``--steps`` (no stop at the target,
whose step depends on when the evaluation process answers) without a tracker, with W&B
(offline: its own files, its service process), with MLflow (a local SQLite store) and with
both, one seed per round, the variants in a rotating order.

    python benchmarks/tracking_overhead.py [--rounds 5] [--steps 30000] [--out FILE.json]

Each variant of a round trains the same seed for the same steps, and the same updates (no
policy lag): the runs differ only by the tracking. Two figures per run: the run's own wall
seconds (``result.json``'s ``wall_s``, start to the end of training: what tracking could
slow) and the process's wall seconds
(``python -m fastrl.train`` start to exit: what the user waits, including each tracker's
start-up and, at the end, the ONNX export and the uploads). Medians over the rounds, and each
against no tracking in the same round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fastrl.bench.report import provenance

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "cartpole_ppo.yaml"
VARIANTS = {
    "none": [],
    "wandb": ["log.wandb.enabled=true", "log.wandb.mode=offline"],
    "mlflow": ["log.mlflow.enabled=true", "log.mlflow.tracking_uri=sqlite:///{tmp}/mlflow.db",
               "log.mlflow.artifact_location={tmp}/mlflow-artifacts"],
}
VARIANTS["both"] = VARIANTS["wandb"] + VARIANTS["mlflow"]


def one_run(variant: str, seed: int, steps: int, tmp: Path) -> dict:
    """Train the default job for ``steps`` once with ``variant``'s tracking; its figures."""
    name = f"{variant}-s{seed}"
    overrides = [o.format(tmp=tmp) for o in VARIANTS[variant]]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "fastrl.train", str(CONFIG), f"seed={seed}",
         f"algo.total_steps={steps}", "algo.target_return=null", f"log.run_dir={tmp}",
         f"log.run_name={name}", "log.console=false", *overrides],
        capture_output=True, text=True, cwd=tmp, timeout=600)
    process_s = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{name} exited {proc.returncode}: {proc.stderr[-2000:]}")
    result = json.loads((tmp / name / "result.json").read_text())
    return {"variant": variant, "seed": seed, "global_step": result["global_step"],
            "run_s": result["wall_s"], "process_s": round(process_s, 2)}


def main() -> None:
    """Every variant once per round, rotating; print and write medians and ratios."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=30_000, help="env steps of every run")
    p.add_argument("--out", type=Path, help="JSON file of every run and the medians")
    args = p.parse_args()
    names = list(VARIANTS)
    runs = []
    with tempfile.TemporaryDirectory(prefix="fastrl-tracking-") as tmp:
        for r in range(args.rounds):
            for variant in names[r % len(names):] + names[:r % len(names)]:
                run = one_run(variant, r + 1, args.steps, Path(tmp))
                runs.append(run)
                print(f"round {r + 1} {variant:6s} steps {run['global_step']:>7,} run "
                      f"{run['run_s']:6.2f} s  process {run['process_s']:6.2f} s", flush=True)
    base = {run["seed"]: run for run in runs if run["variant"] == "none"}
    summary = {}
    for variant in names:
        mine = [run for run in runs if run["variant"] == variant]
        summary[variant] = {
            "run_s": statistics.median(run["run_s"] for run in mine),
            "process_s": statistics.median(run["process_s"] for run in mine),
            "run_ratio": statistics.median(run["run_s"] / base[run["seed"]]["run_s"]
                                           for run in mine),
            "process_ratio": statistics.median(
                run["process_s"] / base[run["seed"]]["process_s"] for run in mine),
            "same_steps": all(run["global_step"] == base[run["seed"]]["global_step"]
                              for run in mine)}
    print(f"\nmedians of {args.rounds} rounds (ratios: against no tracking, same seed)")
    print(f"{'tracking':10s} {'run s':>7s} {'x none':>7s} {'process s':>10s} {'x none':>7s} "
          "same steps")
    for variant, s in summary.items():
        print(f"{variant:10s} {s['run_s']:7.2f} {s['run_ratio']:7.2f} {s['process_s']:10.2f} "
              f"{s['process_ratio']:7.2f} {s['same_steps']}")
    if args.out:
        doc = {**provenance("python benchmarks/tracking_overhead.py"),
               "options": vars(args) | {"out": str(args.out)}, "runs": runs,
               "summary": summary}
        args.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
