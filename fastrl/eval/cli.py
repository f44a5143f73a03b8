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
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from fastrl.core.files import write_atomically
from fastrl.errors import INPUT_ERRORS
from fastrl.eval.checkpoints import (
    DEVICES,
    checkpoint_report,
    evaluate_checkpoints,
)
from fastrl.eval.harness import SUITE_FIELDS, EvalError

USER_ERRORS = (*INPUT_ERRORS, EvalError)
PIPED_WIDTH = 240
SUITE_HELP = {
    "first_seed": "first env seed (default: the config's log.eval_seed)",
    "num_seeds": "number of seeds (default: log.eval_episodes)",
    "episodes_per_seed": "episodes played from each seed; episode k>0 continues the env "
                         "after its own reset (default: log.eval_episodes_per_seed)",
    "max_steps": "step cap of an episode (default: log.eval_max_steps)",
}


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
    parser.add_argument("--member", metavar="K|best",
                        help="a population's checkpoints: evaluate member K only, or the "
                             "member with the best return in the checkpoint's last "
                             "evaluation (default: every member)")
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
    members = "member" in report["per_seed"][0]  # (a population's, every member)
    table.add_column("member:seed" if members else "seed", justify="right")
    _stat_columns(table)
    for entry in report["per_seed"]:
        table.add_row(f"{entry['member']}:{entry['seed']}" if members else str(entry["seed"]),
                      *_stat_cells(entry))
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
                                                 SUITE_FIELDS}, ns.device,
                                      member=ns.member)
    except USER_ERRORS as e:
        print(f"fastrl.eval: error: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fastrl.eval: interrupted", file=sys.stderr)
        return 130
    for note in report["skipped"]:  # (a corrupt newest checkpoint: an older one was used)
        print(f"fastrl.eval: {note}", file=sys.stderr)
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
