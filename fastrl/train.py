"""python -m fastrl.train [CONFIG.yaml | --resume RUN_DIR] [key=value ...]: train an agent.

With no CONFIG the defaults (CartPole-v1 PPO, the same as configs/cartpole_ppo.yaml) run.
``--resume RUN_DIR`` continues a stopped or crashed run from its newest valid checkpoint,
with the run's config and any overrides given.
Exit status: 0 finished or stopped on request, 1 the run failed, 2 bad config, env or
checkpoint, 130 a second Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import sys

from fastrl.checkpoint import CheckpointError
from fastrl.config import ConfigError, field_docs, load_config
from fastrl.memory.layout import UnsupportedSpace
from fastrl.memory.segments import SharedMemoryFull
from fastrl.models.policy import UnsupportedActionSpace
from fastrl.rollout.envs import EnvError
from fastrl.supervisor import ChildFailed
from fastrl.trainer import Trainer


def _as_override(value: object) -> str:
    """A default as it would be typed on the command line."""
    if value is None:
        return "null"
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_args(argv: list[str]) -> tuple[str | None, str | None, list[str]]:
    """Split argv into an optional config path, an optional run to resume and
    ``key=value`` overrides."""
    keys = "\n".join(f"  {k + '=' + _as_override(d):<34} {t:<14} {doc}"
                     for k, t, d, doc in field_docs())
    parser = argparse.ArgumentParser(
        prog="python -m fastrl.train", description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  python -m fastrl.train configs/cartpole_ppo.yaml "
               "infra.num_workers=2 algo.lr=3e-4\n  python -m fastrl.train --resume "
               "runs/CartPole-v1_ppo_s1_20261202-120000 algo.total_steps=200000"
               f"\n\nconfig keys (key=default, type, meaning):\n{keys}",
    )
    parser.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE",
                        help="a YAML config file first (optional), then key=value overrides")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="continue this run from its newest valid checkpoint")
    ns = parser.parse_args(argv)
    args = ns.args
    if args and "=" not in args[0]:
        if ns.resume:
            parser.error("--resume takes the run's own config; give only key=value overrides")
        return args[0], None, args[1:]
    return None, ns.resume, args


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit status."""
    path, resume, overrides = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        trainer = Trainer.resume(resume, overrides) if resume else \
            Trainer(load_config(path, overrides))
        result = trainer.fit()
    except (ConfigError, CheckpointError, EnvError, UnsupportedSpace,
            UnsupportedActionSpace) as e:
        print(f"fastrl.train: error: {e}", file=sys.stderr)
        return 2
    except (ChildFailed, SharedMemoryFull) as e:
        print(f"fastrl.train: run failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fastrl.train: interrupted; shared memory released", file=sys.stderr)
        return 130
    summary = {
        "run_dir": str(result.run_dir), "global_step": result.global_step,
        "wall_s": round(result.wall_s, 2), "steps_per_sec": round(result.steps_per_sec, 1),
        "eval": result.eval, "stopped_by_signal": result.stopped_by_signal,
        "restarts": result.restarts, "checkpoint": result.checkpoint,
    }
    (result.run_dir / "result.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
