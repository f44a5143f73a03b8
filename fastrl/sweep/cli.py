"""The command line of ``python -m fastrl.sweep CONFIG --space SPACE.yaml --trials N
[--out DIR]``: a hyper-parameter sweep with Optuna, whose study survives a crash.

Every trial is a normal run directory (``DIR/trials/trial-<n>``, fastrl.sweep.trial); the
study is an SQLite database in Optuna's own schema (``DIR/study.db``: ``optuna-dashboard
sqlite:///DIR/study.db`` reads it); ``--resume`` continues it without redoing a finished
trial. At the end: a table of the trials, ``DIR/best.yaml`` (the best trial's whole config,
which ``python -m fastrl.train`` takes as it is) and ``DIR/sweep.png``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from fastrl.config import ConfigError, load_config, to_yaml
from fastrl.sweep.space import load_space, override
from fastrl.sweep.trial import OBJECTIVES, TrialPlan, TrialRun

STUDY = "fastrl"
PRUNERS = ("median", "hyperband", "none")
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line (see the module documentation)."""
    p = argparse.ArgumentParser(prog="python -m fastrl.sweep", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", type=Path, help="the config every trial starts from")
    p.add_argument("overrides", nargs="*", help="key=value overrides for every trial")
    p.add_argument("--space", type=Path, required=True, help="the search space YAML file")
    p.add_argument("--trials", type=int, required=True, help="finished trials wanted in all")
    p.add_argument("--out", type=Path, help="the sweep's folder (default sweeps/<config>-<time>)")
    p.add_argument("--resume", action="store_true", help="continue the study in --out")
    p.add_argument("--objective", choices=tuple(OBJECTIVES), default="solve-time",
                   help="solve-time: seconds until the mean of the last 20 training episodes "
                   "reaches --threshold (minimized); final-return / best-return: the last / "
                   "best evaluation at --max-steps (maximized). Default solve-time")
    p.add_argument("--threshold", type=float,
                   help="solve-time's bar (default: the config's algo.target_return)")
    p.add_argument("--max-steps", type=int, default=500_000,
                   help="env steps a trial may take (default 500000)")
    p.add_argument("--max-seconds", type=float, default=600.0,
                   help="seconds a trial may take (default 600)")
    p.add_argument("--pruner", choices=PRUNERS, default="median",
                   help="how bad trials are stopped from their training-return curve "
                   "(default median)")
    p.add_argument("--startup-trials", type=int, default=5,
                   help="trials the pruner never stops: its baseline (default 5, Optuna's)")
    p.add_argument("--report-every", type=int, default=10_000,
                   help="env steps between two points of the curve the pruner sees")
    p.add_argument("--parallel", type=int, default=1, help="trials at once (default 1)")
    p.add_argument("--seed", type=int, default=0, help="the TPE sampler's seed")
    return p.parse_intermixed_args(argv)


def make_pruner(name: str, plan: TrialPlan, startup: int) -> optuna.pruners.BasePruner:
    """The pruner ``--pruner`` names; the first ``startup`` trials and every trial's first
    report are never pruned (too little to compare)."""
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=startup,
                                           n_warmup_steps=plan.report_every)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=plan.report_every,
                                              max_resource=plan.max_steps)
    return optuna.pruners.NopPruner()


def check_cores(parallel: int, overrides: list[str], config: Path) -> None:
    """Refuse ``--parallel`` trials that this machine's cores cannot each give a core per
    worker and one for the learner (with ``infra.runtime=ray`` the workers are the Ray
    cluster's actors: a trial needs a core here for its learner only)."""
    if parallel < 1:
        raise ConfigError(f"--parallel {parallel}: must be at least 1")
    cfg = load_config(config, overrides)
    workers_here = 0 if cfg.infra.runtime == "ray" else cfg.infra.num_workers
    per_trial = workers_here + 1
    cores = len(os.sched_getaffinity(0))
    if parallel > 1 and parallel * per_trial > cores:
        raise ConfigError(
            f"--parallel {parallel}: each trial runs {per_trial} busy processes here "
            f"({workers_here} workers and the learner); {parallel} trials need "
            f"{parallel * per_trial} cores, this machine gives {cores}")


def fail_stale(study: optuna.Study) -> list[int]:
    """Mark the trials a killed sweep left running as failed (they are run again, as new
    trials); returns their numbers."""
    stale = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.RUNNING]
    for t in stale:
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
    return [t.number for t in stale]


def trial_table(study: optuna.Study) -> str:
    """One line per trial: number, state, objective, wall seconds, parameters."""
    lines = [f"{'trial':>5}  {'state':8} {'objective':>11} {'wall s':>7}  parameters"]
    for t in study.get_trials(deepcopy=False):
        value = f"{t.value:11.4g}" if t.state == TrialState.COMPLETE else f"{'-':>11}"
        wall = t.user_attrs.get("wall_s")
        params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in t.params.items())
        lines.append(f"{t.number:5d}  {t.state.name.lower():8} {value} "
                     f"{wall if wall is not None else '-':>7}  {params}")
    return "\n".join(lines)


def write_best(study: optuna.Study, plan: TrialPlan, out: Path) -> Path | None:
    """``out/best.yaml``: the best trial's whole config (None while no trial completed)."""
    if not any(t.state == TrialState.COMPLETE for t in study.get_trials(deepcopy=False)):
        return None
    best = study.best_trial
    cfg = load_config(plan.config, [*plan.overrides,
                                    *(override(k, v) for k, v in best.params.items())])
    path = out / "best.yaml"
    path.write_text(f"# python -m fastrl.sweep: trial {best.number} of {out}, "
                    f"{plan.objective} {best.value:.4g}\n" + to_yaml(cfg))
    return path


def plot(study: optuna.Study, plan: TrialPlan, path: Path) -> bool:
    """``sweep.png``: the objective per trial, and each parameter against the objective
    (False where matplotlib is not installed)."""
    try:
        import matplotlib
        import matplotlib.ticker
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    done = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
    keys = [p.key for p in plan.space]
    fig, axes = plt.subplots(1, 1 + len(keys), figsize=(4 * (1 + len(keys)), 3.2),
                             squeeze=False)
    axes = axes[0]
    axes[0].plot([t.number for t in done], [t.value for t in done], "o")
    axes[0].set(xlabel="trial", ylabel=plan.objective)
    for ax, key in zip(axes[1:], keys):
        ax.plot([t.params.get(key) for t in done], [t.value for t in done], "o")
        ax.set(xlabel=key, ylabel=plan.objective)
        if any(p.log for p in plan.space if p.key == key):
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the sweep; 0 when every trial wanted finished, 130 after Ctrl-C, 2 on bad
    input."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = args.out or Path("sweeps") / f"{args.config.stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    db = out / "study.db"
    try:
        if args.resume and not db.is_file():
            raise ConfigError(f"--resume: {db} does not exist (no sweep to continue there)")
        if not args.resume and db.exists():
            raise ConfigError(f"{db} exists: add --resume to continue that sweep, or give "
                              "another --out")
        space = load_space(args.space, args.config, args.overrides)
        check_cores(args.parallel, args.overrides, args.config)
        threshold = args.threshold if args.threshold is not None else \
            load_config(args.config, args.overrides).algo.target_return
        if args.objective == "solve-time" and threshold is None:
            raise ConfigError("--objective solve-time needs --threshold (the config's "
                              "algo.target_return is null)")
    except ConfigError as e:
        print(f"fastrl.sweep: error: {e}", file=sys.stderr)
        return 2
    plan = TrialPlan(args.config.resolve(), tuple(args.overrides), tuple(space),
                     args.objective, threshold, args.max_steps, args.max_seconds,
                     args.report_every, (out / "trials").resolve())
    out.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=STUDY, storage=f"sqlite:///{db}", load_if_exists=args.resume,
        direction=OBJECTIVES[args.objective],
        pruner=make_pruner(args.pruner, plan, args.startup_trials),
        sampler=optuna.samplers.TPESampler(seed=args.seed))
    for number in fail_stale(study):
        print(f"fastrl.sweep: trial {number} was running when the sweep stopped; it is "
              "marked failed and its place taken by a new trial", file=sys.stderr)
    finished = sum(t.state in FINISHED for t in study.get_trials(deepcopy=False))
    stopped = False
    try:
        study.optimize(lambda trial: TrialRun(plan, trial)(),
                       n_trials=max(0, args.trials - finished), n_jobs=args.parallel,
                       catch=(RuntimeError,), callbacks=[_tell])
    except KeyboardInterrupt:
        stopped = True
    print(trial_table(study))
    best = write_best(study, plan, out)
    if best:
        print(f"best: trial {study.best_trial.number}, {args.objective} "
              f"{study.best_value:.4g}; its config: {best}")
    if plot(study, plan, out / "sweep.png"):
        print(f"plot: {out / 'sweep.png'}")
    return 130 if stopped else 0


def _tell(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    """One line per finished trial."""
    value = f"{trial.value:.4g}" if trial.state == TrialState.COMPLETE else "-"
    print(f"fastrl.sweep: trial {trial.number} {trial.state.name.lower()}: {value} "
          f"({trial.user_attrs.get('wall_s', '-')} s)", flush=True)
