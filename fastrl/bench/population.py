"""The ``solve`` scenario's population race (``--population K``): K seeds of a task's shipped
config trained in one run (``population.size=K``), against the same K seeds trained as
single runs one after another, in the same bench run.

Every run is judged as the solve scenario judges one (fastrl.bench.solve): a member is
solved when the mean return of its last ended training episodes first reaches the task's
threshold, read from the ``group`` column of the population's ``episodes.csv`` (its steps
are the run's, every member's together: a member's own are the run's divided by K). The
population run is stopped once every member is solved; its time is when the last one was.
The singles' time is the sum of their times to solved, each from its process's start, as
one after another they would take.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from fastrl.bench.solve import (
    CONFIGS,
    TASKS,
    SolveRun,
    Task,
    first_solved,
    judge,
    or_dash,
    read_rows,
    run_fastrl,
    run_process,
)

POPULATION = "fastrl population"  # the system name of a population's members


def _member_rows(rows: list[dict[str, str]], k: int, size: int) -> list[dict[str, str]]:
    """Member ``k``'s episodes of a population's ``episodes.csv``, at its own steps."""
    return [{**r, "step": str(int(float(r["step"])) // size)} for r in rows
            if r["group"] == f"member{k}"]


def run_population(task: Task, size: int, first_seed: int, work: Path,
                   extra: list[str] = ()) -> list[SolveRun]:
    """One run of ``size`` members of ``task``'s shipped config (seeds ``first_seed`` ...),
    stopped once every member is solved (or capped); one :class:`SolveRun` per member,
    ``wall_s`` the run's."""
    name = f"fastrl-population{size}-{task.name}-s{first_seed}"
    run_dir = work / name
    cmd = [sys.executable, "-m", "fastrl.train", str(CONFIGS / task.config),
           f"seed={first_seed}", f"population.size={size}", "algo.target_return=null",
           f"log.run_dir={work}", f"log.run_name={name}", "log.console=false",
           *task.overrides, *extra]

    def every_member_solved(rows: list[dict[str, str]]) -> bool:
        return all(first_solved([float(r["return"]) for r in _member_rows(rows, k, size)],
                                task.threshold, task.window) is not None
                   for k in range(size))

    whole = SolveRun(task.name, POPULATION, first_seed)
    t0 = run_process(cmd, whole, run_dir / "episodes.csv", task.threshold,
                     task.max_steps * size, task.max_seconds, work / f"{name}.log",
                     task.window, every_member_solved)
    rows = read_rows(run_dir / "episodes.csv")
    members = []
    for k in range(size):
        member = SolveRun(task.name, POPULATION, first_seed + k, wall_s=whole.wall_s,
                          note=whole.note)
        judge(member, _member_rows(rows, k, size), t0, task.threshold, window=task.window)
        members.append(member)
    return members


def run_population_race(task: Task, size: int, first_seed: int, work: Path,
                        extra: list[str] = ()) -> Iterator[SolveRun]:
    """The singles (seeds ``first_seed`` ... ``first_seed + size - 1``, one after another),
    then the population of the same seeds, each run as it ends (a population's members
    together)."""
    for k in range(size):
        yield run_fastrl(task, first_seed + k, work, extra)
    yield from run_population(task, size, first_seed, work, extra)


def run_population_solve(tasks: list[str], size: int, first_seed: int,
                         extra: list[str] = ()) -> Iterator[SolveRun]:
    """:func:`run_population_race` of every task, in a work folder removed after."""
    with tempfile.TemporaryDirectory(prefix="fastrl-population-") as tmp:
        for name in tasks:
            yield from run_population_race(TASKS[name], size, first_seed, Path(tmp), extra)


def population_summary(runs: list[SolveRun]) -> list[dict]:
    """Per task: the singles' summed seconds to solved and the population's seconds until
    its last member solved, their ratio (None where a run did not solve), and steps."""
    rows = []
    for task in dict.fromkeys(r.task for r in runs):
        singles = [r for r in runs if r.task == task and r.system == "fastrl"]
        members = [r for r in runs if r.task == task and r.system == POPULATION]
        if not singles or not members:
            continue
        single_s = None if any(r.solved_s is None for r in singles) else \
            sum(r.solved_s for r in singles)
        pop_s = None if any(r.solved_s is None for r in members) else \
            max(r.solved_s for r in members)
        rows.append({
            "task": task, "members": len(members), "singles_solved": sum(
                r.solved_s is not None for r in singles),
            "members_solved": sum(r.solved_s is not None for r in members),
            "singles_s": single_s, "population_s": pop_s,
            "ratio": None if single_s is None or pop_s is None else pop_s / single_s,
            "singles_steps": [r.solved_step for r in singles],
            "member_steps": [r.solved_step for r in members]})
    return rows


def print_population(rows: list[dict]) -> None:
    """The population races' table."""
    print("\npopulation race: K seeds in one run against K single runs one after another")
    print(f"{'task':<14} {'K':>3} {'singles solved':>14} {'members solved':>14} "
          f"{'singles s':>10} {'population s':>12} {'ratio':>6}")
    for r in rows:
        print(f"{r['task']:<14} {r['members']:>3} {r['singles_solved']:>14} "
              f"{r['members_solved']:>14} {or_dash(r['singles_s'], '.1f'):>10} "
              f"{or_dash(r['population_s'], '.1f'):>12} {or_dash(r['ratio'], '.2f'):>6}")
