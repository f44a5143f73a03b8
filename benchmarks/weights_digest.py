"""Fingerprint the weights that each data mode and feature trains to, for a refactor's
"nothing changes for users" check.

    python benchmarks/weights_digest.py > before.txt      # on the old code
    python benchmarks/weights_digest.py --compare before.txt

Each case is a short ``python -m fastrl.train`` run of a fixed seed with
``infra.deterministic=true`` (the learner takes the same slots, with the same weights
versions, whatever the timing), so its saved model is a function of the code alone. Prints
one line per case: its name and the SHA-256 of the model's parameters and of its
``episodes.csv`` (step, return and length of every episode). ``--compare FILE`` reruns
and says, case by case, whether both match; it exits 1 when any differs.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
QUIET = ["algo.target_return=null", "log.eval_every_steps=100000000",
         "log.checkpoint_every_steps=100000000", "log.tensorboard=false",
         "log.console=false", "infra.deterministic=true", "seed=3"]
SMALL = ["infra.envs_per_worker=4", "infra.rollout_len=32"]
RELAY = ["env.fn=scripted_envs:Relay", "infra.envs_per_worker=6"]  # tests/scripted_envs.py
CASES = {  # name: (config, overrides)
    "ppo-lag1": ("configs/cartpole_ppo.yaml", ["algo.total_steps=6000"]),
    "appo": ("configs/cartpole_ppo.yaml",
             ["algo.name=appo", "infra.max_policy_lag=null", "algo.gae_lambda=0.95",
              "algo.total_steps=6000"]),
    "a2c-gru": (None, ["algo.name=a2c", "algo.core=gru", "algo.core_size=16", *SMALL,
                       "algo.total_steps=4000"]),
    "ppo-lstm-recall": (None, ["env.id=fastrl/Recall-v0", "algo.core=lstm",
                               "algo.core_size=16", *SMALL, "algo.update_epochs=2",
                               "algo.normalize_obs=true", "algo.normalize_reward=true",
                               "algo.total_steps=4000"]),
    "relay-gru": (None, [*RELAY, "algo.core=gru", "algo.core_size=8", "infra.rollout_len=16",
                         "algo.update_epochs=2", "algo.total_steps=4000"]),
    "selfplay-duel": (None, ["env.id=fastrl/Duel-v0", "selfplay.enabled=true",
                             "selfplay.snapshot_every=2", "selfplay.pool_size=3",
                             "selfplay.latest_prob=0.2", *SMALL, "algo.update_epochs=2",
                             "algo.total_steps=6000"]),
    "dqn": ("configs/cartpole_dqn.yaml", ["algo.total_steps=4000",
                                          "algo.replay.learning_starts=1000"]),
    "sac": ("configs/pendulum_sac.yaml", ["algo.total_steps=1500",
                                          "algo.replay.learning_starts=500",
                                          "algo.replay.batch_size=64"]),
}


def digest(config: str | None, overrides: list[str], root: Path) -> str:
    """The SHA-256 (12 hex digits) of one run's model, and of its episodes.csv."""
    run = root / f"run-{len(list(root.iterdir()))}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "fastrl.train",
                           *([str(ROOT / config)] if config else []), *overrides, *QUIET,
                           f"log.run_dir={root}", f"log.run_name={run.name}"],
                          cwd=ROOT, capture_output=True, text=True, env=env)
    if done.returncode:
        sys.exit(f"{config} {' '.join(overrides)} failed:\n{done.stderr}")
    model = torch.load(run / "model.pt", weights_only=True)["model"]
    weights = hashlib.sha256(b"".join(t.numpy().tobytes() for t in model.values()))
    with (run / "episodes.csv").open() as f:  # (step, return, length): not the wall time
        rows = [r[:3] for r in csv.reader(f)]
    episodes = hashlib.sha256(repr(rows).encode())
    return f"{weights.hexdigest()[:12]} {episodes.hexdigest()[:12]}"


def main() -> None:
    """Run every case (or ``--only``), print its digests, compare with ``--compare``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(CASES))
    parser.add_argument("--compare", type=Path, help="a file this script printed before")
    args = parser.parse_args()
    before = {}
    if args.compare:
        before = dict(line.split(" ", 1) for line in args.compare.read_text().splitlines()
                      if " " in line and not line.startswith("#"))
    differ = 0
    with tempfile.TemporaryDirectory(prefix="fastrl-digest-") as tmp:
        for name in args.only.split(","):
            now = digest(*CASES[name], Path(tmp))
            verdict = ""
            if args.compare:
                same = before.get(name) == now
                differ += not same
                verdict = "  same" if same else f"  DIFFERS (before: {before.get(name)})"
            print(f"{name} {now}{verdict}", flush=True)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
