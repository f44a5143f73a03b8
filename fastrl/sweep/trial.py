"""One trial of a sweep: a normal run (``python -m fastrl.train``, its own run directory)
with the trial's parameters, watched through its episode log.

Its training-return curve (the mean of the last 20 training episodes, the bench's solve
criterion: fastrl.bench.solve) goes to Optuna every ``report_every`` env steps, so that the
pruner can stop a bad trial early (SIGINT: the run stops as any run does). The objective:

- ``solve-time`` (minimized): seconds until that mean first reaches the threshold; a trial
  that does not reach it within the caps scores the time cap times (1 + its shortfall, the
  distance of its best mean from the threshold relative to the threshold, at most 1);
- ``final-return`` / ``best-return`` (maximized): the last / best evaluation mean return
  (``evals.csv``) of a run to the step budget.
"""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import optuna

from fastrl.bench.solve import WINDOW, first_solved, read_rows, stop
from fastrl.core.process import exit_with_parent
from fastrl.sweep.space import Param, override

#: Each objective and the direction Optuna optimizes it in.
OBJECTIVES = {"solve-time": "minimize", "final-return": "maximize", "best-return": "maximize"}
POLL_S = 0.2  # between looks at a trial's episode log


@dataclass(frozen=True)
class TrialPlan:
    """What every trial of a sweep shares: the config and its overrides, the space, the
    objective with its threshold and caps, where trials go, and how often the curve is
    reported."""

    config: Path
    overrides: tuple[str, ...]
    space: tuple[Param, ...]
    objective: str
    threshold: float | None
    max_steps: int
    max_seconds: float
    report_every: int
    trials_dir: Path
    extra: tuple[str, ...] = field(default=())

    def command(self, name: str, params: list[str]) -> list[str]:
        """The trial's ``python -m fastrl.train`` command line. Where the trial is tracked
        (``log.wandb``, ``log.mlflow``), its run joins the W&B group and the MLflow
        experiment named after the sweep's folder, unless the sweep's own overrides name
        others."""
        budget = ["algo.target_return=null"]
        if self.objective != "solve-time":
            budget.append(f"algo.total_steps={self.max_steps}")
        sweep = self.trials_dir.parent.name
        return [sys.executable, "-m", "fastrl.train", str(self.config),
                f"log.wandb.group={sweep}", f"log.mlflow.experiment={sweep}", *self.overrides,
                *params, *budget, f"log.run_dir={self.trials_dir}", f"log.run_name={name}",
                "log.console=false"]


def _die_with_the_sweep() -> None:
    """In the trial's process before exec: a SIGTERM (a graceful stop) when the sweep
    dies, so that a killed sweep leaves no trial running."""
    exit_with_parent(signal.SIGTERM)


def rolling_means(returns: list[float]) -> np.ndarray:
    """The mean of the last WINDOW returns at each episode from the WINDOW-th on."""
    r = np.asarray(returns, np.float64)
    if len(r) < WINDOW:
        return np.empty(0)
    return np.convolve(r, np.ones(WINDOW), "valid") / WINDOW


class TrialRun:
    """Runs one trial and returns its objective (:meth:`__call__`); raises
    ``optuna.TrialPruned`` when the pruner stops it."""

    def __init__(self, plan: TrialPlan, trial: optuna.Trial) -> None:
        self.plan, self.trial = plan, trial
        self.name = f"trial-{trial.number:04d}"
        self.run_dir = plan.trials_dir / self.name
        self.reported = 0  # the last env step whose curve value was reported

    def __call__(self) -> float:
        plan, trial = self.plan, self.trial
        params = [override(p.key, p.suggest(trial)) for p in plan.space]
        trial.set_user_attr("run_dir", str(self.run_dir))
        plan.trials_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with (plan.trials_dir / f"{self.name}.log").open("w") as log:
            # A session of its own: a terminal's Ctrl-C reaches the sweep only, which then
            # stops the trial with one SIGINT (a second one would end it unsaved).
            proc = subprocess.Popen(plan.command(self.name, params), stdout=log,
                                    stderr=subprocess.STDOUT, preexec_fn=_die_with_the_sweep,
                                    start_new_session=True)
            try:
                pruned = self._watch(proc, t0)
            finally:
                stop(proc)
        wall = time.monotonic() - t0
        trial.set_user_attr("wall_s", round(wall, 2))
        episodes = read_rows(self.run_dir / "episodes.csv")
        trial.set_user_attr("steps", int(float(episodes[-1]["step"])) if episodes else 0)
        if pruned:
            raise optuna.TrialPruned(f"{self.name}: its training return fell behind")
        if proc.returncode not in (0, -signal.SIGINT, 130):
            raise RuntimeError(f"{self.name} exited with status {proc.returncode} (see "
                               f"{plan.trials_dir / f'{self.name}.log'})")
        return self._objective(episodes, t0)

    def _watch(self, proc: subprocess.Popen, t0: float) -> bool:
        """Follow the run until it exits, is decided or capped (then it is stopped by the
        caller); True when the pruner asked to stop it."""
        plan = self.plan
        while proc.poll() is None:
            time.sleep(POLL_S)
            rows = read_rows(self.run_dir / "episodes.csv")
            if self._report(rows):
                return True
            returns = [float(r["return"]) for r in rows]
            if plan.objective == "solve-time" and \
                    first_solved(returns, plan.threshold) is not None:
                return False
            if time.monotonic() - t0 > plan.max_seconds or \
                    (rows and float(rows[-1]["step"]) >= plan.max_steps):
                return False
        return False

    def _report(self, rows: list[dict[str, str]]) -> bool:
        """Report the curve at every ``report_every`` env steps reached since the last
        report; True when the pruner would stop the trial."""
        if not rows:
            return False
        steps = np.array([float(r["step"]) for r in rows])
        means = rolling_means([float(r["return"]) for r in rows])
        sign = -1.0 if OBJECTIVES[self.plan.objective] == "minimize" else 1.0
        every = self.plan.report_every
        while self.reported + every <= steps[-1]:
            self.reported += every
            seen = int(np.searchsorted(steps, self.reported, side="right"))  # episodes so far
            if seen >= WINDOW:
                self.trial.report(sign * float(means[seen - WINDOW]), self.reported)
                if self.trial.should_prune():
                    return True
        return False

    def _objective(self, episodes: list[dict[str, str]], t0: float) -> float:
        """The trial's score from its logs (see the module documentation)."""
        plan = self.plan
        if plan.objective == "solve-time":
            returns = [float(e["return"]) for e in episodes]
            i = first_solved(returns, plan.threshold)
            if i is not None:
                return float(episodes[i]["time"]) - self._started(t0)
            means = rolling_means(returns)
            best = float(means.max()) if len(means) else -math.inf
            shortfall = (plan.threshold - best) / max(abs(plan.threshold), 1e-9)
            return plan.max_seconds * (1 + min(1.0, max(0.0, shortfall)))
        evals = [float(e["return_mean"]) for e in read_rows(self.run_dir / "evals.csv")
                 if e.get("source", "eval") == "eval"]
        if not evals:
            raise RuntimeError(f"{self.name} wrote no evaluation (see {self.run_dir})")
        return evals[-1] if plan.objective == "final-return" else max(evals)

    @staticmethod
    def _started(t0: float) -> float:
        """The Unix time of monotonic ``t0`` (episode rows carry Unix times)."""
        return time.time() - (time.monotonic() - t0)
