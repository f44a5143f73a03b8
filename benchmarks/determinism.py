"""What deterministic asynchrony (``infra.deterministic``) costs, per data mode, in one run.

    python benchmarks/determinism.py [--repeats 3] [--only ppo,appo,dqn,sac]

Trains each mode's shipped config for a fixed number of env steps with
``infra.deterministic`` true and false, alternating the two (so that a noisy machine slows
both alike), each run a fresh ``python -m fastrl.train`` process; prints the median wall
seconds of each side and their ratio, and whether the deterministic runs of a seed ended
with the same weights.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
QUIET = ["algo.target_return=null", "log.eval_every_steps=100000000",
         "log.checkpoint_every_steps=100000000", "log.tensorboard=false", "log.console=false"]
MODES = {  # name: (data mode, config, overrides)
    "ppo": ("SYNC, lag 1", "configs/cartpole_ppo.yaml", ["algo.total_steps=50000"]),
    "appo": ("ASYNC", "configs/cartpole_ppo.yaml",
             ["algo.name=appo", "infra.max_policy_lag=null", "algo.gae_lambda=0.95",
              "algo.total_steps=50000"]),
    "dqn": ("REPLAY", "configs/cartpole_dqn.yaml", ["algo.total_steps=30000"]),
    "sac": ("REPLAY", "configs/pendulum_sac.yaml", ["algo.total_steps=6000"]),
}


def train(config: str, overrides: list[str], root: Path) -> tuple[float, str]:
    """Wall seconds of one ``python -m fastrl.train`` run, and its model's SHA-256."""
    run_dir = root / f"run-{time.monotonic_ns()}"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "fastrl.train", str(ROOT / config),
                           *overrides, *QUIET, f"log.run_dir={root}",
                           f"log.run_name={run_dir.name}"],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{config} {' '.join(overrides)} failed:\n{done.stderr}")
    seconds = time.perf_counter() - start
    model = torch.load(run_dir / "model.pt", weights_only=True)["model"]
    digest = hashlib.sha256(b"".join(t.numpy().tobytes() for t in model.values()))
    return seconds, digest.hexdigest()[:12]


def main() -> None:
    """Parse the arguments, run every mode, print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default=",".join(MODES))
    args = parser.parse_args()
    print(f"{'algo':6} {'mode':12} {'det s':>7} {'free s':>7} {'det/free':>8}  same weights")
    with tempfile.TemporaryDirectory(prefix="fastrl-determinism-") as tmp:
        for name in args.only.split(","):
            data, config, overrides = MODES[name]
            seconds: dict[bool, list[float]] = {True: [], False: []}
            digests = set()
            for i in range(args.repeats):
                for deterministic in ((True, False) if i % 2 == 0 else (False, True)):
                    s, digest = train(config, overrides +
                                      [f"infra.deterministic={str(deterministic).lower()}"],
                                      Path(tmp))
                    seconds[deterministic].append(s)
                    if deterministic:
                        digests.add(digest)
            det, free = (statistics.median(seconds[k]) for k in (True, False))
            print(f"{name:6} {data:12} {det:7.2f} {free:7.2f} {det / free:8.2f}  "
                  f"{'yes' if len(digests) == 1 else f'NO: {sorted(digests)}'}", flush=True)


if __name__ == "__main__":
    main()
