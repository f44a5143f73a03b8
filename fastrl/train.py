"""python -m fastrl.train [CONFIG.yaml | --resume PATH [--fork NAME]] [key=value ...]: train.

With no CONFIG the defaults (CartPole-v1 PPO, CleanRL's settings) run; configs/ holds
the shipped configs, tuned for wall time to a solved policy.
The run's architecture in short (fastrl.describe's summary) goes to stderr at start-up.
``--resume RUN_DIR`` continues a stopped or crashed run from its newest valid checkpoint,
with the run's config and any overrides given; ``--resume RUN_DIR/checkpoints/<checkpoint>``
goes back to that checkpoint (with the config that wrote it), setting the newer ones
aside. ``--fork NAME`` continues in a new run directory instead, leaving the run as it is
(fastrl.trainer.Trainer.resume).
Exit status: 0 finished or stopped on request, 1 the run failed (a full disk too), 2 bad
input found before any process started (config, env, policy, checkpoint, a run directory
that cannot be written, more shared memory than /dev/shm has room for), 130 a second
Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import sys

from fastrl.core.forkserver import start_fork_server

if __name__ == "__main__":
    # Before the imports below: the fork server imports torch and fastrl on one core while
    # this process does on another, and the learner and workers then start in milliseconds.
    start_fork_server()

from fastrl.config import field_docs, load_config
from fastrl.core.files import DiskFull, write_atomically
from fastrl.describe import config_and_overrides, describe, summary
from fastrl.errors import INPUT_ERRORS
from fastrl.runtime.faults import ChildFailed
from fastrl.runtime.ray_workers import RayUnavailable
from fastrl.trainer import Trainer


def _as_override(value: object) -> str:
    """A default as it would be typed on the command line."""
    if value is None:
        return "null"
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_args(argv: list[str]) -> tuple[str | None, str | None, str | None, list[str]]:
    """Split argv into an optional config path, an optional run or checkpoint to resume,
    an optional fork's name and ``key=value`` overrides."""
    keys = "\n".join(f"  {k + '=' + _as_override(d):<34} {t:<14} {doc}"
                     for k, t, d, doc in field_docs())
    parser = argparse.ArgumentParser(
        prog="python -m fastrl.train", description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  python -m fastrl.train configs/cartpole_ppo.yaml "
               "infra.num_workers=2 algo.lr=3e-4\n  python -m fastrl.train --resume "
               "runs/CartPole-v1_ppo_s1_20261202-120000 algo.total_steps=200000"
               "\n  python -m fastrl.train --resume runs/CartPole-v1_ppo_s1_20261202-120000/"
               "checkpoints/000001-step50176 --fork lr-1e-4 algo.lr=1e-4"
               f"\n\nconfig keys (key=default, type, meaning):\n{keys}",
    )
    parser.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE",
                        help="a YAML config file first (optional), then key=value overrides")
    parser.add_argument("--resume", metavar="PATH",
                        help="continue a run: a run directory from its newest valid "
                             "checkpoint, or RUN_DIR/checkpoints/<checkpoint> from that one")
    parser.add_argument("--fork", metavar="NAME",
                        help="with --resume: continue in a new run directory NAME (beside "
                             "the run, or a path), leaving the run as it is")
    ns = parser.parse_args(argv)
    path, overrides = config_and_overrides(ns.args)
    if path is not None and ns.resume:
        parser.error("--resume takes the run's own config; give only key=value overrides")
    if ns.fork and not ns.resume:
        parser.error("--fork needs --resume PATH: the run or checkpoint to fork")
    return path, ns.resume, ns.fork, overrides


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit status."""
    path, resume, fork, overrides = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        trainer = Trainer.resume(resume, overrides, fork=fork) if resume else \
            Trainer(load_config(path, overrides))
        print(summary(describe(trainer.plan, run_dir=trainer.resumed_dir)), file=sys.stderr)
        result = trainer.fit()
        outcome = {
            "run_dir": str(result.run_dir), "global_step": result.global_step,
            "wall_s": round(result.wall_s, 2), "steps_per_sec": round(result.steps_per_sec, 1),
            "eval": result.eval, "stopped_by_signal": result.stopped_by_signal,
            "restarts": result.restarts, "checkpoint": result.checkpoint,
        }
        write_atomically(result.run_dir / "result.json",
                         (json.dumps(outcome, indent=2) + "\n").encode())
    except INPUT_ERRORS as e:
        print(f"fastrl.train: error: {e}", file=sys.stderr)
        return 2
    except (ChildFailed, RayUnavailable, DiskFull) as e:
        print(f"fastrl.train: run failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fastrl.train: interrupted; shared memory released", file=sys.stderr)
        return 130
    print(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
