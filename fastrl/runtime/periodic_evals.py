"""Periodic evaluations (``log.eval_every_steps``) in a process of their own, so that the
learner never stops training for one.

The learner sends the weights that are due (an ``evaluate`` message, with a copy of its
flat parameters). Here one process at a time evaluates them on the run's seed suite, on
the CPU with one torch thread, and sends its result back through a pipe; the result is
logged as the learner's own evaluations were (``eval``: console, TensorBoard, evals.csv,
callbacks). While one runs, only the newest request waits: an older one is skipped, and
said so. When the learner evaluates its last weights itself, at the end of a run, the one
running is ended: its result would come after a newer one. An evaluation that reaches
``algo.target_return`` marks the run solved in the run's control block (the verdict:
fastrl.memory.control), each member of a population on its own; the learner then keeps
those weights (fastrl.learner.evaluations), and ends the run once every member is
solved.
"""

from __future__ import annotations

import os
import time
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import torch

from fastrl.checkpoint import describe_latest
from fastrl.core.process import become_child, read_crash, report_crash
from fastrl.eval.harness import SeedSuite, evaluate, record_solved
from fastrl.memory.control import RunControl
from fastrl.memory.segments import attach
from fastrl.memory.wait import Stopped
from fastrl.models.policy import load_flat_params
from fastrl.plan import RunPlan
from fastrl.runtime.children import KILL_WAIT_S, PERIODIC_EVAL, Children
from fastrl.runtime.faults import ChildFailed, Watchdog
from fastrl.runtime.memory import RunMemory
from fastrl.telemetry.events import RunEvents


def run_periodic_eval(parent_pid: int, plan: RunPlan, params: np.ndarray, run_dir: str,
                      control_name: str, results: Connection) -> None:
    """Process entry point: evaluate the policy of ``plan`` with weights ``params`` and
    send the summary (fastrl.eval.harness.summarize) to ``results``. Every step beats
    ``EVAL_BEAT`` in the run's control block (``control_name``) and looks at its stop
    flag (then it exits 0, sending nothing). Exit 1 with a crash report on error."""
    become_child(parent_pid)
    torch.set_num_threads(1)  # beside the learner and workers, on their cores
    try:
        shm = attach(control_name)
        control = RunControl(shm.buf)

        def should_stop() -> bool:
            control.beat_eval(time.monotonic_ns())
            return control.stop_requested()

        policy = plan.policy()
        load_flat_params(policy, params)
        policy.eval()
        suite = SeedSuite.of(plan.cfg.log)
        results.send(evaluate(policy, plan.env, suite.seeds, "cpu", suite.max_steps,
                              should_stop, episodes_per_seed=suite.episodes_per_seed,
                              selfplay=plan.cfg.selfplay))
    except Stopped:
        pass
    except BaseException as e:
        os._exit(report_crash(run_dir, PERIODIC_EVAL, e))


class PeriodicEvals:
    """Evaluates the weights the learner sends (:meth:`request`), one process at a time,
    and logs each result through ``events``; marks each member solved in the run's control
    block when its evaluation reaches the target return, and starts no more once every
    member is. ``last`` is the newest result."""

    def __init__(self, plan: RunPlan, run_dir: str, children: Children, events: RunEvents,
                 memory: RunMemory, watchdog: Watchdog) -> None:
        self.plan, self.run_dir, self.children = plan, run_dir, children
        self.events, self.memory, self.watchdog = events, memory, watchdog
        self.waiting: tuple[int, np.ndarray] | None = None  # the newest request not started
        self.running: tuple[int, Connection] | None = None  # its env step, its result pipe
        self.last: dict[str, float] | None = None

    def request(self, step: int, params: np.ndarray) -> None:
        """Evaluate the weights of env step ``step`` as soon as no other evaluation runs."""
        if self.waiting is not None:
            self.events.logger.event(step, f"the evaluation at step {self.waiting[0]:,} was "
                                     "skipped: the one before it was still running")
        self.waiting = (step, params)
        self.poll()

    def poll(self) -> None:
        """Log the result of a finished evaluation; start the waiting one. Raise
        :class:`~fastrl.runtime.faults.ChildFailed` when the one running has made no
        progress for ``infra.learner_timeout_s`` (as the learner's own evaluation would)."""
        proc = self.children.get(PERIODIC_EVAL)
        if self.running is not None:
            if proc.exitcode is None:
                self._check_progress()
                return
            self._log(*self.running, proc)
            self.running = None
        if self.waiting is not None and self.memory.control.solved_step() is None:
            (step, params), self.waiting = self.waiting, None
            receive, send = self.children.ctx.Pipe(duplex=False)
            self.memory.control.start_eval(step)
            self.children.spawn(PERIODIC_EVAL, run_periodic_eval, self.children.parent_pid(),
                                self.plan, params, self.run_dir, self.memory.control_name,
                                send)
            send.close()  # (the child's copy is the only writer: EOF if it dies)
            self.running = (step, receive)

    def cancel(self) -> None:
        """The learner has evaluated its last weights itself: drop the evaluation waiting
        and end the one running (its result, of older weights, would come after)."""
        self.waiting = None
        if self.running is not None:
            proc = self.children[PERIODIC_EVAL]
            proc.kill()
            proc.join(KILL_WAIT_S)
            self.running[1].close()
            self.running = None

    def _check_progress(self) -> None:
        timeout = self.plan.cfg.infra.learner_timeout_s
        fault = self.watchdog.heartbeat_fault(
            PERIODIC_EVAL, self.memory.control.last_eval_beat(), timeout, "learner_timeout_s")
        if fault is not None:
            self.children[PERIODIC_EVAL].kill()
            raise ChildFailed(f"the evaluation at step {self.running[0]:,}: {fault}\n"
                              f"The run stopped. {describe_latest(self.run_dir)}")

    def _log(self, step: int, receive: Connection, proc: Any) -> None:
        try:
            result = receive.recv() if proc.exitcode == 0 and receive.poll() else None
        except EOFError:
            result = None
        finally:
            receive.close()
        if result is None and proc.exitcode == 0 and self.memory.control.stop_requested():
            # (it saw the stop flag and left without a result, as asked: no failure)
            self.events.logger.event(self.events.now(), f"the evaluation at step {step:,} "
                                     "was cut short by the stop")
            return
        if result is None:
            self.events.logger.event(
                self.events.now(), f"the evaluation at step {step:,} failed "
                f"({self.children.describe_exit(PERIODIC_EVAL)})",
                detail=read_crash(self.run_dir, PERIODIC_EVAL) or "")
            return
        record_solved(self.memory.control, step, result, self.plan.cfg.algo.target_return)
        self.last = result
        self.events.put(("eval", step, result))
