"""python -m fastrl.bench: fastrl's throughput next to its peers, measured in one run.

Every figure is a median over --repeats windows of --duration seconds (after --warmup);
steps per CPU-second sums user+system time of every process of the measured run (this one
and all it started). Peers that start one process per env (gymnasium AsyncVectorEnv, SB3
SubprocVecEnv) run with as many envs as fastrl has worker processes, so that both use the
same number of processes; SyncVectorEnv and EnvPool step the same total envs as fastrl.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from functools import partial
from pathlib import Path

from fastrl.bench import peers
from fastrl.bench.fastrl_runs import SCENARIOS, run_fastrl
from fastrl.bench.learner import LEARNER_SCENARIOS, SideResult, print_learner, run_learner
from fastrl.bench.measure import Result, failed
from fastrl.bench.population import population_summary, print_population, run_population_solve
from fastrl.bench.replay import print_replay, run_replay
from fastrl.bench.report import plot_scaling, print_table, write_json
from fastrl.bench.solve import (
    DEFAULT_TASKS,
    FIRST_RACE_SEED,
    OWN,
    TASKS,
    ctrl_c_between_runs,
    plot_solve,
    print_solve,
    races,
    run_solve,
    summarize,
)
from fastrl.config import ConfigError
from fastrl.envs import BUILTIN_BATCHED
from fastrl.envs.heavy import spin_iters_for
from fastrl.envs.multiagent import pettingzoo_factory
from fastrl.envs.source import EnvError
from fastrl.runtime.faults import ChildFailed

ALL_PEERS = ("raw", "sync", "async", "sb3", "envpool", "supersuit")
MULTI_AGENT_PEERS = ("supersuit",)  # what steps a PettingZoo env (the others: Gymnasium's)
# fastrl's batched multi-agent games, and the same game under PettingZoo's API for the peers
PETTINGZOO_TWIN = {"fastrl/Duel-v0": "fastrl.bench.duel_pettingzoo"}
IN_PROCESS = ("replay", *LEARNER_SCENARIOS)  # no env workers: measured in this process
SOLVE = "solve"  # whole training runs, each a process of its own (fastrl.bench.solve)
# --heavy-us: each CartPole's twin with fixed CPU work per step (env.kwargs spin_iters)
HEAVY = {"CartPole-v1": "fastrl/HeavyCartPole-v1", "fastrl/CartPole-v1": "fastrl/CartPole-v1"}
# What a measurement may raise that becomes a row saying so (run_repeats)
MEASUREMENT_ERRORS = (ConfigError, EnvError, ChildFailed, TimeoutError, RuntimeError, OSError)


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") \
            from None
    if min(values) < 1:
        raise argparse.ArgumentTypeError("every value must be >= 1")
    return values


def _positive(kind: type, zero_ok: bool = False):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value < 0 or (value == 0 and not zero_ok):
            raise argparse.ArgumentTypeError(f"must be {'>=' if zero_ok else '>'} 0, got {text}")
        return value
    return parse


def _names(allowed: tuple[str, ...]):
    def parse(text: str) -> list[str]:
        names = [v for v in text.split(",") if v]
        bad = [n for n in names if n not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {bad}; choose from {', '.join(allowed)}")
        return names
    return parse


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The bench's options (see --help)."""
    p = argparse.ArgumentParser(prog="python -m fastrl.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", type=_names((*SCENARIOS, *IN_PROCESS, SOLVE)),
                   default=["collect"],
                   help="comma-separated: collect (random actions, env stepping + ring "
                        "writes), collect-policy (policy forward in the loop), train (PPO end "
                        "to end), train-lag1 (the same with infra.max_policy_lag=1: "
                        "collection overlaps learning), train-appo (APPO end to end, same "
                        "workers and envs), "
                        "collect-ray (collect with the workers as Ray actors on a local Ray: "
                        "its steps/s against collect's, and where the extra cost goes), "
                        "learner (the PPO learner alone on synthetic slots, in this process: "
                        "samples/s with batch staging on vs off, --repeats alternating "
                        "rounds, on CUDA the copy time hidden behind compute), learner-appo "
                        "(the same for APPO), replay (fastrl.replay against numpy and cpprb, "
                        "in one process; --duration per comparison), solve (fastrl's shipped "
                        "configs and Stable-Baselines3 with the RL Zoo's hyper-parameters "
                        "train --solve-tasks from scratch, one run at a time: seconds and env "
                        "steps until the mean return of the last 20 training episodes reaches "
                        "the task's threshold; solve.png). Default: collect")
    p.add_argument("--env", type=lambda t: [v for v in t.split(",") if v],
                   default=["CartPole-v1"],
                   help="comma-separated env ids fastrl runs (fastrl/CartPole-v1 is fastrl's "
                        "numba batched CartPole; a PettingZoo module runs one row per agent, "
                        "--envs-per-worker counting rows); peers step the first id of the "
                        "list that is not fastrl's own (CartPole-v1 for fastrl/CartPole-v1). "
                        "Default: CartPole-v1")
    p.add_argument("--backend", type=_names(("gymnasium", "envpool")), default=["gymnasium"],
                   help="comma-separated env.backend values fastrl's runs use, each its own "
                        "row (envpool: one EnvPool batch per worker; default gymnasium)")
    p.add_argument("--heavy-us", type=float, default=0.0,
                   help="add this many µs of fixed CPU work to every env step (0: off): "
                        "CartPole-v1 becomes fastrl/HeavyCartPole-v1 (its peers' env too), "
                        "fastrl/CartPole-v1 does the same work inside its numba kernel")
    cores = len(os.sched_getaffinity(0))
    p.add_argument("--workers", type=_ints, default=sorted({1, cores}),
                   help=f"comma-separated worker counts (a scaling curve); default 1,{cores} "
                        "(the cores this process may use)")
    p.add_argument("--envs-per-worker", type=_positive(int), default=64,
                   help="envs per fastrl worker (default 64)")
    p.add_argument("--rollout-len", type=_positive(int), default=64,
                   help="steps per slot (default 64)")
    p.add_argument("--duration", type=_positive(float), default=5.0,
                   help="seconds measured per repeat (default 5)")
    p.add_argument("--warmup", type=_positive(float), default=1.0,
                   help="seconds before measuring (default 1)")
    p.add_argument("--repeats", type=_positive(int), default=3,
                   help="windows per configuration; the median is reported (default 3)")
    p.add_argument("--peers", type=_names(ALL_PEERS), default=list(ALL_PEERS),
                   help=f"comma-separated baselines to run, from {', '.join(ALL_PEERS)}; "
                        "empty string for none. A PettingZoo env (--env naming its module, "
                        "e.g. mpe2.simple_spread_v3) is raced by supersuit only, the "
                        "Gymnasium ids by the others")
    p.add_argument("--pin", action="store_true",
                   help="pin fastrl worker i to core i mod cores (psutil affinity; local runtime "
                        "only: Ray places its actors itself)")
    p.add_argument("--out", type=Path, default=Path("bench_results"),
                   help="folder for bench.json and scaling.png")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument("--replay-capacity", type=_positive(int), default=1_000_000,
                   help="replay scenario: capacity of the vector-obs buffers (default 1000000)")
    p.add_argument("--replay-frames", type=_positive(int, zero_ok=True), default=100_000,
                   help="replay scenario: capacity of the 84x84 uint8 frame buffer, 0 to leave "
                        "frames out (default 100000)")
    p.add_argument("--solve-tasks", type=_names(tuple(TASKS)), default=list(DEFAULT_TASKS),
                   help=f"solve scenario: comma-separated tasks from {', '.join(TASKS)} "
                        f"(default: {','.join(DEFAULT_TASKS)}; the MuJoCo tasks need the "
                        "mujoco extra, breakout-ppo the atari one)")
    p.add_argument("--seeds", type=_positive(int), default=5,
                   help="solve scenario: N seeds of every system, from --first-seed "
                        "(default 5)")
    p.add_argument("--first-seed", type=_positive(int), default=FIRST_RACE_SEED,
                   help=f"solve scenario: the first seed (default {FIRST_RACE_SEED}: races "
                        "run on seeds the shipped configs were not tuned on, which were 1-3)")
    p.add_argument("--solve-first-peer", action="store_true",
                   help="solve scenario: only the first SB3 variant of each task (DummyVecEnv; "
                        "on 2 cores SubprocVecEnv's process per env is the slower one)")
    p.add_argument("--solve-own-only", action="store_true",
                   help="solve scenario: race each system at its own settings only, without "
                        "SB3 at fastrl's settings and fastrl at the zoo's")
    p.add_argument("--solve-max-seconds", type=_positive(float), default=None,
                   help="solve scenario: stop every run unsolved after this many seconds "
                        "(default: each task's own cap)")
    p.add_argument("--solve-max-steps", type=_positive(int), default=None,
                   help="solve scenario: stop every run unsolved after this many env steps "
                        "(default: each task's own cap)")
    p.add_argument("--solve-override", action="append", default=[], metavar="KEY=VALUE",
                   help="solve scenario: a config override for fastrl's runs (a sweep; "
                        "repeatable)")
    p.add_argument("--population", type=_positive(int), default=None, metavar="K",
                   help="solve scenario: race K seeds of each task trained in one run "
                        "(population.size=K) against the same K seeds as single runs, one "
                        "after another (from --first-seed; instead of the SB3 races)")
    return p.parse_args(argv)


def median(results: list[Result]) -> Result:
    """The repeat with the median steps/sec (a whole row, so its figures agree)."""
    ranked = sorted(results, key=lambda r: r.steps_per_sec)
    return ranked[(len(ranked) - 1) // 2]


def main(argv: list[str] | None = None) -> int:
    """Run every requested measurement, print the table, write JSON and the plot."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    env_ids, kwargs, peer_default = args.env, {}, "CartPole-v1"
    if args.heavy_us:
        unknown = [e for e in env_ids if e not in HEAVY]
        if unknown:
            print(f"--heavy-us: no heavy twin of {unknown}; it applies to "
                  f"{', '.join(HEAVY)}", file=sys.stderr)
            return 2
        env_ids, peer_default = [HEAVY[e] for e in env_ids], HEAVY["CartPole-v1"]
        kwargs = {"spin_iters": spin_iters_for(args.heavy_us)}
    peer_env = next((PETTINGZOO_TWIN.get(e, e) for e in env_ids
                     if e not in BUILTIN_BATCHED or e in PETTINGZOO_TWIN), peer_default)
    window = dict(warmup_s=args.warmup, duration_s=args.duration)
    extra = ["infra.pin_workers=true"] if args.pin else []

    jobs: list[tuple[str, object]] = []  # (label, zero-argument measurement)
    learner_jobs: list[tuple[str, object]] = []  # (label, measurement of both sides)
    for scenario in args.scenario:
        if scenario in ("replay", SOLVE):
            continue  # runs of their own below: no env workers here
        for env_id, backend in itertools.product(env_ids, args.backend):
            for w in args.workers:
                label = f"fastrl {scenario} {env_id} {backend} w={w}"
                if scenario in LEARNER_SCENARIOS:
                    if backend != args.backend[0]:
                        continue  # no envs step in the learner scenarios
                    learner_jobs.append((label, partial(
                        run_learner, scenario, env_id, kwargs, w, args.envs_per_worker,
                        args.rollout_len, rounds=args.repeats,
                        label_env=env_id != peer_env, **window)))
                else:
                    jobs.append((label, partial(
                        run_fastrl, scenario, env_id, kwargs, w, args.envs_per_worker,
                        args.rollout_len, label_env=env_id != peer_env,
                        # (Ray places its actors itself)
                        extra=[f"env.backend={backend}",
                               *([] if "infra.runtime=ray" in SCENARIOS[scenario] else extra)],
                        **window)))
    # The peers step envs as fastrl's collect scenarios do: nothing to compare them with
    # when none of those runs (the solve scenario runs SB3 its own way).
    peer_jobs = args.peers if any(s in SCENARIOS for s in args.scenario) else []
    multi_agent = pettingzoo_factory(peer_env) is not None
    peer_jobs = [p for p in peer_jobs if (p in MULTI_AGENT_PEERS) == multi_agent]
    if "raw" in peer_jobs:
        jobs.append(("raw", partial(peers.raw_loop, peer_env, kwargs, **window)))
    for w in args.workers:
        total = w * args.envs_per_worker
        if "sync" in peer_jobs:
            jobs.append(("sync", partial(peers.gymnasium_sync, peer_env, kwargs, total,
                                         **window)))
        if "async" in peer_jobs:
            jobs.append(("async", partial(peers.gymnasium_async, peer_env, kwargs, w,
                                          **window)))
        if "sb3" in peer_jobs:
            jobs.append(("sb3", partial(peers.sb3_subproc, peer_env, kwargs, w, **window)))
        if "envpool" in peer_jobs:
            jobs.append(("envpool", partial(peers.envpool, peer_env, kwargs, total, w,
                                            **window)))
        if "supersuit" in peer_jobs:
            jobs.append(("supersuit", partial(peers.supersuit, peer_env, kwargs, total, w,
                                              **window)))

    repeats: list[list[Result]] = []
    interrupted = False
    for label, job in jobs:
        try:
            runs = run_repeats(job, args.repeats)
        except KeyboardInterrupt:
            interrupted = _interrupted()
            break
        print(f"{label}: " + ", ".join(f"{r.steps_per_sec:,.0f}" for r in runs) + " steps/s"
              + (f" ({runs[0].note})" if runs[0].note else ""), file=sys.stderr)
        repeats.append(runs)
    replay: list[Result] = []
    if "replay" in args.scenario and not interrupted:
        try:
            for row in run_replay(args.replay_capacity, args.replay_frames, args.warmup,
                                  args.duration):
                replay.append(row)
        except KeyboardInterrupt:
            interrupted = _interrupted()
    learner: list[SideResult] = []
    for label, job in learner_jobs:
        if interrupted:
            break
        try:
            sides = run_sides(job)
        except KeyboardInterrupt:
            interrupted = _interrupted()
            break
        print(f"{label}: " + ", ".join(f"{s.median.steps_per_sec:,.0f} samples/s "
                                       f"({s.median.note})" for s in sides), file=sys.stderr)
        learner += sides
    solve = []
    if SOLVE in args.scenario and not interrupted:
        try:
            seeds = list(range(args.first_seed, args.first_seed + args.seeds))
            # (kept as they end: a Ctrl-C reports the runs that finished before it)
            with ctrl_c_between_runs():
                runs = run_population_solve(args.solve_tasks, args.population,
                                            args.first_seed, args.solve_override) \
                    if args.population else \
                    run_solve(args.solve_tasks, seeds, args.solve_override,
                              peers="sb3" in args.peers, max_seconds=args.solve_max_seconds,
                              max_steps=args.solve_max_steps, equal=not args.solve_own_only,
                              first_peer=args.solve_first_peer)
                for run in runs:
                    solve.append(run)
                    _print_solve_run(run)
        except KeyboardInterrupt:
            interrupted = _interrupted()
    results = [median(rs) for rs in repeats]
    raw = next((r.steps_per_sec for r in results if r.system == "raw loop"), None)

    args.out.mkdir(parents=True, exist_ok=True)
    if results or not (replay or learner or solve):
        print_table(results, raw)
    if replay:
        print_replay(replay)
    if learner:
        print_learner([s.median for s in learner])
    solve_rows, race_rows = summarize(solve), races(solve)
    population_rows = population_summary(solve)
    if population_rows:
        print_population(population_rows)
    elif solve_rows:
        print_solve(solve_rows, race_rows)
    options = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    write_json(args.out / "bench.json", options,
               results + replay + [s.median for s in learner],
               repeats + [[r] for r in replay] + [s.rounds for s in learner],
               {"solve": {"summary": solve_rows, "races": race_rows,
                          "population": population_rows,
                          "runs": [r.as_dict() for r in solve]}}
               if solve else None)
    print(f"wrote {args.out / 'bench.json'}")
    if not args.no_plot and solve:
        if plot_solve(args.out / "solve.png", solve):
            print(f"wrote {args.out / 'solve.png'}")
    if not args.no_plot and (results or not solve):
        if plot_scaling(args.out / "scaling.png", results, raw):
            print(f"wrote {args.out / 'scaling.png'}")
        else:
            print("no plot: nothing measured, or matplotlib is not installed "
                  "(pip install -e '.[bench]')")
    return 130 if interrupted else 0


def _print_solve_run(run) -> None:
    """One line per solve run as it ends (the table comes at the end)."""
    solved = "unsolved" if run.solved_s is None else \
        f"solved in {run.solved_s:.1f} s, {run.solved_step:,} steps"
    evals = f"; eval target at {run.eval_s:.1f} s" if run.eval_s is not None else ""
    at = "" if run.settings == OWN else f" at {run.settings} settings"
    print(f"solve {run.task} {run.system}{at} seed {run.seed}: {solved}{evals}"
          + (f" ({run.note})" if run.note else ""), file=sys.stderr)


def _interrupted() -> bool:
    """Say that the bench stops at a Ctrl-C and reports what it has; True."""
    print("interrupted: reporting what was measured so far", file=sys.stderr)
    return True


def failure_row(job, error: Exception) -> Result:
    """The row of a measurement that raised: what went wrong, in one line."""
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    return failed(job, f"failed: {type(error).__name__}: {first}")


def run_repeats(job, repeats: int) -> list[Result]:
    """``repeats`` measurements (one for a skipped peer); a failure becomes a row that says
    what went wrong instead of ending the whole bench."""
    runs = []
    for _ in range(repeats):
        try:
            r = job()
        except MEASUREMENT_ERRORS as e:
            r = failure_row(job, e)
        runs.append(r)
        if r.note:
            break
    return runs


def run_sides(job) -> list[SideResult]:
    """A learner measurement (both sides, every round); a failure becomes one row that says
    what went wrong."""
    try:
        return job()
    except MEASUREMENT_ERRORS as e:
        row = failure_row(job, e)
        return [SideResult(row, [row])]


if __name__ == "__main__":
    sys.exit(main())
