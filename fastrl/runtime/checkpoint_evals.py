"""Evaluating the checkpoints of a run in their own process as they are written
(``log.eval_on_checkpoint``), one at a time, beside the learner and the workers."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastrl.core.process import become_child, read_crash, report_crash
from fastrl.envs.source import EnvSource
from fastrl.eval.checkpoints import evaluate_checkpoint_to
from fastrl.plan import RunPlan
from fastrl.runtime.children import CHECKPOINT_EVAL, POLL_S, Children
from fastrl.telemetry.events import RunEvents

EVAL_DRAIN_S = 120.0  # at the end of a run, for the checkpoint evaluations still waiting


def checkpoint_eval_path(run_dir: Path, checkpoint: str) -> Path:
    """Where the evaluation of a checkpoint folder goes: ``RUN_DIR/evals/<folder>.json``."""
    return Path(run_dir) / "evals" / f"{Path(checkpoint).name}.json"


def checkpoint_eval_summary(result: dict) -> dict[str, float]:
    """The flat statistics of a checkpoint evaluation's JSON (fastrl.eval)."""
    return {k: float(v) for k, v in result["summary"].items()}


def run_checkpoint_eval(parent_pid: int, checkpoint: str, out: str, env: EnvSource,
                        policy: Any) -> None:
    """Process entry point: evaluate one checkpoint (fastrl.eval) into ``out``, with the
    run's own env source and policy (which the run directory may not be able to rebuild)."""
    become_child(parent_pid)
    try:
        evaluate_checkpoint_to(checkpoint, out, env, policy)
    except BaseException as e:
        os._exit(report_crash(str(Path(out).parent.parent), CHECKPOINT_EVAL, e))


class CheckpointEvals:
    """Starts an evaluation process for each checkpoint the run's ``events`` saw written,
    one at a time, and logs each result as an evaluation of the run. ``stop_requested()``
    and ``forced()`` are the run's stop flags."""

    def __init__(self, plan: RunPlan, run_dir: Path, children: Children, events: RunEvents,
                 stop_requested: Callable[[], bool], forced: Callable[[], bool]) -> None:
        self.plan, self.run_dir, self.children, self.events = plan, run_dir, children, events
        self.enabled = plan.cfg.log.eval_on_checkpoint
        self.stop_requested, self.forced = stop_requested, forced
        self.started = 0  # checkpoints handed to an evaluation process so far
        self.evaluating: str | None = None  # the checkpoint being evaluated now
        self.results: dict[str, dict[str, float]] = {}  # summaries by checkpoint folder

    def poll(self) -> None:
        """Log the result of a finished checkpoint evaluation; start the next one."""
        if not self.enabled:
            return
        proc = self.children.get(CHECKPOINT_EVAL)
        if proc is not None and proc.exitcode is None:
            return
        if proc is not None and self.evaluating is not None:
            self._log(self.evaluating, proc)
            self.evaluating = None
        written = self.events.checkpoints
        while self.started < len(written) and not self.forced():
            checkpoint = written[self.started]
            self.started += 1
            if not Path(checkpoint).is_dir():  # rotated out (log.keep_checkpoints) meanwhile
                self.events.logger.event(self.events.now(), f"{checkpoint} was deleted "
                                         "before it could be evaluated (log.keep_checkpoints)")
                continue
            self.evaluating = checkpoint
            self.children.spawn(CHECKPOINT_EVAL, run_checkpoint_eval, self.children.parent_pid(),
                                checkpoint,
                                str(checkpoint_eval_path(self.run_dir, checkpoint)),
                                self.plan.env, self.plan.policy_spec)
            return

    def _log(self, checkpoint: str, proc: Any) -> None:
        out = checkpoint_eval_path(self.run_dir, checkpoint)
        step = self.events.now()
        if proc.exitcode != 0 or not out.is_file():
            report = read_crash(self.run_dir, CHECKPOINT_EVAL) or ""
            self.events.logger.event(step, f"the evaluation of {checkpoint} failed "
                                     f"({self.children.describe_exit(CHECKPOINT_EVAL)})",
                                     detail=report)
            return
        result = json.loads(out.read_text())
        summary = checkpoint_eval_summary(result)
        self.results[Path(checkpoint).name] = summary
        self.events.evaluation(int(result["global_step"]), summary, checkpoint)

    def finish(self) -> None:
        """At the end of a run that was not interrupted, evaluate the checkpoints still
        waiting (up to EVAL_DRAIN_S) so that the last one is in the logs too."""
        if not self.enabled:
            return
        deadline = time.monotonic() + EVAL_DRAIN_S
        while (self.evaluating is not None or self.started < len(self.events.checkpoints)) \
                and not self.stop_requested() and time.monotonic() < deadline:
            self.poll()
            time.sleep(POLL_S)
