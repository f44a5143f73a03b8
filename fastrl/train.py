"""python -m fastrl.train [CONFIG.yaml] [key=value ...]: train an agent.

With no CONFIG the defaults (CartPole-v1 PPO, the same as configs/cartpole_ppo.yaml) run.
Exit status: 0 finished or stopped on request, 1 the run failed, 2 bad config or env.
"""

from __future__ import annotations

import argparse
import json
import sys

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


def parse_args(argv: list[str]) -> tuple[str | None, list[str]]:
    """Split argv into an optional config path and ``key=value`` overrides."""
    keys = "\n".join(f"  {k + '=' + _as_override(d):<34} {t:<14} {doc}"
                     for k, t, d, doc in field_docs())
    parser = argparse.ArgumentParser(
        prog="python -m fastrl.train", description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: python -m fastrl.train configs/cartpole_ppo.yaml infra.num_workers=2 "
               f"algo.lr=3e-4\n\nconfig keys (key=default, type, meaning):\n{keys}",
    )
    parser.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE",
                        help="a YAML config file first (optional), then key=value overrides")
    args = parser.parse_args(argv).args
    if args and "=" not in args[0]:
        return args[0], args[1:]
    return None, args


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit status."""
    path, overrides = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        cfg = load_config(path, overrides)
        result = Trainer(cfg).fit()
    except (ConfigError, EnvError, UnsupportedSpace, UnsupportedActionSpace) as e:
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
    }
    (result.run_dir / "result.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
