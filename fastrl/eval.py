"""python -m fastrl.eval RUN_DIR_or_CHECKPOINT [more ...]: evaluate trained policies.

Each path is a checkpoint folder or a run directory (its newest valid checkpoint). Every
checkpoint plays the same fixed seed suite (the first one's ``log.eval_*`` config, or the
options below) with its deterministic policy, on the first one's env. One path prints a
table per seed; several print one comparison row per checkpoint. ``--json`` prints the
result as JSON instead, ``--out FILE`` writes it to FILE as well: for one checkpoint
:func:`checkpoint_report`'s document, for several :func:`evaluate_checkpoints`'s.
Exit status: 0 done, 2 a bad path, a corrupt checkpoint, checkpoints of different envs or a
bad option, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from fastrl.checkpoint import (
    Checkpoint,
    LoadedPolicy,
    find_checkpoint,
    load_policy,
    write_atomically,
)
from fastrl.config import ConfigError
from fastrl.errors import INPUT_ERRORS
from fastrl.evaluation import SUITE_FIELDS, EvalError, SeedSuite, evaluate_episodes
from fastrl.plan import resolve_device
from fastrl.rollout.envs import EnvSource

DEVICES = ("cpu", "cuda", "auto")
# What must match for two checkpoints to be evaluated on one env: manifest key, its name.
SAME_ENV_KEYS = (("env_id", "env.id"), ("observation_space", "observation space"),
                 ("action_space", "action space"))
USER_ERRORS = (*INPUT_ERRORS, EvalError)
PIPED_WIDTH = 240
SUITE_HELP = {
    "first_seed": "first env seed (default: the config's log.eval_seed)",
    "num_seeds": "number of seeds (default: log.eval_episodes)",
    "episodes_per_seed": "episodes played from each seed; episode k>0 continues the env "
                         "after its own reset (default: log.eval_episodes_per_seed)",
    "max_steps": "step cap of an episode (default: log.eval_max_steps)",
}


def eval_device(requested: str) -> str:
    """``cpu``, ``cuda`` (must exist) or ``auto`` (``cuda`` when torch sees a GPU)."""
    if requested not in DEVICES:
        raise EvalError(f"device {requested!r}: expected one of {', '.join(DEVICES)}")
    try:
        return resolve_device(requested)
    except ConfigError:
        raise EvalError("device 'cuda': CUDA is not available here; use cpu or auto") from None


def check_comparable(checkpoints: Sequence[Checkpoint]) -> None:
    """Refuse checkpoints whose env id or spaces differ from the first one's."""
    first = checkpoints[0]
    for other in checkpoints[1:]:
        for key, what in SAME_ENV_KEYS:
            if other.manifest[key] != first.manifest[key]:
                raise EvalError(
                    f"cannot compare {other.path} with {first.path}: its {what} is "
                    f"{other.manifest[key]!r}, the first's is {first.manifest[key]!r}; "
                    "compare checkpoints of the same env")


def evaluate_loaded(loaded: LoadedPolicy, env: EnvSource, suite: SeedSuite,
                    device: str = "cpu") -> dict[str, Any]:
    """One checkpoint's result on ``suite``: ``checkpoint`` (its folder), ``global_step``,
    ``algo``, ``summary`` (flat floats, :func:`~fastrl.evaluation.summarize`) and
    ``per_seed`` (:meth:`~fastrl.evaluation.Episodes.per_seed`)."""
    if loaded.normalizer is not None:
        # fastrl writes no normaliser yet; evaluating raw observations would misjudge a
        # policy trained on normalised ones, so refuse rather than guess its format.
        raise EvalError(f"{loaded.checkpoint.path}: it holds observation normalisation "
                        "constants, which this fastrl cannot apply; evaluate it with the "
                        "fastrl version that wrote it")
    episodes = evaluate_episodes(loaded.policy.to(device), env, suite.seeds, device,
                                 suite.max_steps, episodes_per_seed=suite.episodes_per_seed)
    return {"checkpoint": str(loaded.checkpoint.path),
            "global_step": loaded.checkpoint.global_step, "algo": loaded.config.algo.name,
            "summary": episodes.summary(), "per_seed": episodes.per_seed()}


def evaluate_checkpoints(paths: Sequence[str | Path],
                         overrides: Mapping[str, int | None] | None = None,
                         device: str = "cpu", env: EnvSource | None = None,
                         policy: Any = None) -> dict[str, Any]:
    """Evaluate checkpoints (folders, or run directories: their newest valid checkpoint) on
    one seed suite and one env, both the first checkpoint's (``overrides``: SeedSuite
    fields to change; None leaves one as it is).

    Every checkpoint is verified and their envs compared before any is evaluated. Returns
    ``{"env_id", "suite": SeedSuite fields, "device", "checkpoints": [result, ...]}`` with
    one :func:`evaluate_loaded` result per path, in order. ``env`` and ``policy`` stand in
    for an env factory or policy the checkpoints' config cannot name (see
    :func:`~fastrl.checkpoint.load_policy`).
    """
    if not paths:
        raise EvalError("no checkpoint to evaluate: give a checkpoint folder or run directory")
    checkpoints = [find_checkpoint(p) for p in paths]
    check_comparable(checkpoints)
    device = eval_device(device)
    loaded = [load_policy(c, env, policy) for c in checkpoints]  # (verified above)
    changes = {k: v for k, v in (overrides or {}).items() if v is not None}
    suite = replace(SeedSuite.of(loaded[0].config.log), **changes)
    env = loaded[0].plan.env
    return {"env_id": env.env_id, "suite": asdict(suite), "device": device,
            "checkpoints": [evaluate_loaded(one, env, suite, device) for one in loaded]}


def checkpoint_report(report: dict[str, Any]) -> dict[str, Any]:
    """The document of a one-checkpoint :func:`evaluate_checkpoints` report: its
    ``env_id``, ``suite`` and ``device`` beside that checkpoint's result fields."""
    (result,) = report["checkpoints"]
    return {**{k: v for k, v in report.items() if k != "checkpoints"}, **result}


def evaluate_checkpoint_to(checkpoint: str, out_path: str, env: EnvSource | None = None,
                           policy: Any = None) -> None:
    """Evaluate one checkpoint on its config's seed suite, on the CPU with one torch thread,
    and write its :func:`checkpoint_report` as JSON to ``out_path`` atomically.

    Picklable: the target of the ``spawn`` process that evaluates a checkpoint written
    during training (``log.eval_on_checkpoint``), beside the learner and workers.
    """
    torch.set_num_threads(1)  # beside the learner and workers, on their cores
    report = checkpoint_report(evaluate_checkpoints([checkpoint], env=env, policy=policy))
    write_atomically(Path(out_path), (json.dumps(report, indent=2) + "\n").encode())


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The paths and options of the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m fastrl.eval", description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  python -m fastrl.eval runs/CartPole-v1_ppo_s1_20261202-120000\n"
               "  python -m fastrl.eval RUN/checkpoints/000001-step40000 "
               "RUN/checkpoints/000002-step60000 --seeds 50 --json",
    )
    parser.add_argument("paths", nargs="+", metavar="RUN_DIR_or_CHECKPOINT")
    for name, (_, flag, _) in SUITE_FIELDS.items():
        parser.add_argument(flag, dest=name, type=int, metavar="N", help=SUITE_HELP[name])
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="where the policy runs (default: cpu)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--out", metavar="FILE", help="also write the JSON to FILE")
    return parser.parse_args(argv)


def one_line(error: Exception) -> str:
    """An error message on one line (some list their causes on indented lines)."""
    return "; ".join(line.strip() for line in str(error).splitlines() if line.strip())


def _stat_cells(stats: dict[str, float], lengths: bool = True) -> list[str]:
    cells = [f"{stats[f'return_{s}']:.2f}" for s in ("mean", "std", "min", "max")]
    cells.append(f"{stats['length_mean']:.1f}")
    if lengths:
        cells += [f"{stats['length_std']:.1f}", f"{stats['length_min']:.0f}",
                  f"{stats['length_max']:.0f}"]
    return cells


def _stat_columns(table: Table, lengths: bool = True) -> None:
    for name in ("return mean", "return std", "return min", "return max", "length mean",
                 *(("length std", "length min", "length max") if lengths else ())):
        table.add_column(name, justify="right")


def suite_title(report: dict[str, Any]) -> str:
    """The env, seed suite and device of a report, in a few words."""
    suite = report["suite"]
    last = suite["first_seed"] + suite["num_seeds"] - 1
    return (f"{report['env_id']}, seeds {suite['first_seed']}..{last}, "
            f"episodes per seed {suite['episodes_per_seed']}, max {suite['max_steps']} steps, "
            f"{report['device']}")


def per_seed_table(report: dict[str, Any]) -> Table:
    """One checkpoint's statistics per seed, then over all its episodes
    (``report``: a :func:`checkpoint_report`)."""
    table = Table(title=f"{report['checkpoint']} (step {report['global_step']:,})\n"
                        f"{suite_title(report)}")
    table.add_column("seed", justify="right")
    _stat_columns(table)
    for entry in report["per_seed"]:
        table.add_row(str(entry["seed"]), *_stat_cells(entry))
    table.add_section()
    table.add_row("all", *_stat_cells(report["summary"]))
    return table


def comparison_table(report: dict[str, Any]) -> Table:
    """One row per checkpoint: its folder, global step and overall statistics."""
    table = Table(title=suite_title(report))
    table.add_column("checkpoint", overflow="fold")
    table.add_column("step", justify="right")
    _stat_columns(table, lengths=False)
    for result in report["checkpoints"]:
        table.add_row(result["checkpoint"], f"{result['global_step']:,}",
                      *_stat_cells(result["summary"], lengths=False))
    return table


def print_tables(report: dict[str, Any]) -> None:
    """A comparison table for several checkpoints, a per-seed table for one."""
    # Piped output has no width to fit: let the table take its natural width.
    console = Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH)
    console.print(comparison_table(report) if "checkpoints" in report else
                  per_seed_table(report))


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit status."""
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    # The batch is a few dozen observations; one thread is as fast and gives the numbers
    # a checkpoint evaluated during training gets.
    torch.set_num_threads(1)
    try:
        report = evaluate_checkpoints(ns.paths, {name: getattr(ns, name) for name in
                                                 SUITE_FIELDS}, ns.device)
    except USER_ERRORS as e:
        print(f"fastrl.eval: error: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fastrl.eval: interrupted", file=sys.stderr)
        return 130
    if len(report["checkpoints"]) == 1:
        report = checkpoint_report(report)
    text = json.dumps(report, indent=2)
    if ns.out:
        try:
            write_atomically(Path(ns.out), (text + "\n").encode())
        except OSError as e:
            print(f"fastrl.eval: error: cannot write --out {ns.out}: {e}", file=sys.stderr)
            return 2
    if ns.json:
        print(text)
    else:
        print_tables(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
