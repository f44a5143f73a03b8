"""A long training run as committed output (issue 43): train for ``--minutes``, stopped by
SIGINT as a user stops a run, evaluate the final policy, and write one JSON file of the
figures the docs quote.

    python benchmarks/long_run.py --minutes 30 --out FILE.json [--window 100] [--bar 5]
        [--eval-seeds 10] [--png FILE.png] -- CONFIG [KEY=VALUE ...]

The file holds the command, the machine (CPU, cores, versions, commit), the run's final
line (env steps, seconds, steps per second), the curve's summary
(``python -m fastrl.bench.curve``'s: the best and the final mean of ``--window`` training
episodes, the best evaluation), where that mean first reached ``--bar`` (env step and
minutes after the process started), every evaluation of ``evals.csv`` and the final
policy's evaluation (``python -m fastrl.eval RUN_DIR --seeds N --json``).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from fastrl.bench.curve import plot_curve, read_rows, rolling_mean, summary
from fastrl.bench.report import provenance

EXIT_WAIT_S = 600  # for the final checkpoint and evaluation after SIGINT


def train(config_args: list[str], run_root: Path, minutes: float) -> tuple[dict, float]:
    """Run ``python -m fastrl.train`` for ``minutes``, then SIGINT it; returns its final
    JSON line and the Unix time it started."""
    cmd = [sys.executable, "-m", "fastrl.train", *config_args, f"log.run_dir={run_root}"]
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        proc.wait(minutes * 60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=EXIT_WAIT_S)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"long_run: the run printed no result (exit code {proc.returncode})")
    return json.loads(lines[-1]), t0


def first_reached(episodes: dict[str, np.ndarray], window: int, bar: float,
                  t0: float) -> dict | None:
    """The env step and minutes since ``t0`` where the mean of ``window`` episodes first
    reached ``bar``; None if it never did."""
    hit = np.flatnonzero(rolling_mean(episodes["return"], window) >= bar)
    if not len(hit):
        return None
    i = hit[0]
    return {"step": int(episodes["step"][i]), "minutes": (episodes["time"][i] - t0) / 60}


def main() -> None:
    """Train, evaluate, write ``--out`` (module doc)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--window", type=int, default=100)
    p.add_argument("--bar", type=float, default=None)
    p.add_argument("--eval-seeds", type=int, default=10)
    p.add_argument("--png", type=Path, default=None)
    p.add_argument("config_args", nargs="+", help="CONFIG [KEY=VALUE ...]")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="fastrl-long-run-") as root:
        final, t0 = train(args.config_args, Path(root), args.minutes)
        run_dir = Path(final["run_dir"])
        episodes, evals = read_rows(run_dir / "episodes.csv"), read_rows(run_dir / "evals.csv")
        evaluated = subprocess.run(
            [sys.executable, "-m", "fastrl.eval", str(run_dir), "--seeds",
             str(args.eval_seeds), "--json"], capture_output=True, text=True, check=True)
        if args.png:
            plot_curve(args.png, run_dir.name, episodes, evals, args.window)
    doc = {**provenance("python benchmarks/long_run.py"), "final": final,
           "curve": summary(episodes, evals, args.window),
           "first_reached": None if args.bar is None else
           first_reached(episodes, args.window, args.bar, t0),
           "evals": {k: v.tolist() for k, v in evals.items()},
           "final_eval": json.loads(evaluated.stdout)}
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: doc[k] for k in ("final", "curve", "first_reached")}, indent=2))


if __name__ == "__main__":
    main()
