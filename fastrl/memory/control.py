"""How a run is steered and how it stops: a small shared-memory block of flags, counters and
heartbeats, one int64 per 64-byte line, each with one writer.

``STOP`` (the supervisor asks every process to stop), ``DONE`` (the learner needs no more
data), ``LEARNER_BEAT`` (the learner's heartbeat, monotonic ns), ``LEARNER_STEP`` (the env
steps the learner has taken in, after every step of its loop: what the supervisor's event
lines count), ``PARKED`` (the supervisor: every worker has exited after the run was
over, so the rings and the workers' parked states are final). The verdict of the periodic
evaluations, the one path by which a run is solved elsewhere than in the learner
(fastrl.learner.evaluations sends the weights, fastrl.runtime.periodic_evals judges
them): ``EVAL_STEP`` (env step + 1 of the weights the evaluation running judges; 0 before
the first), ``EVAL_BEAT`` (its heartbeat, monotonic ns; 0 before its first step),
``SOLVED`` (env step + 1 of the weights that reached the target return; 0: none), one line
per member of a population (fastrl.population): each member is solved on its own, and the
run once every member is. ``PARK_SEQ`` (the learner: run-wide slot number + 1,
fastrl.plan.SlotSchedule, from which on every worker leaves its state, at the start of its
first slot, for the next periodic checkpoint; 0: none), so that a checkpoint
holds the workers' episodes too (fastrl.learner.learner).
"""

from __future__ import annotations

import numpy as np

from fastrl.memory.atomics import load_acquire, store_release

STOP, DONE, PARKED, LEARNER_BEAT, LEARNER_STEP, EVAL_STEP, EVAL_BEAT, PARK_SEQ, SOLVED = \
    (8 * i for i in range(9))
LINES = 9  # with one member; each further member adds a SOLVED line


class RunControl:
    """The run's flags over ``buf`` (:meth:`nbytes` bytes, zeroed: a run not yet begun),
    for as many members as its size holds."""

    def __init__(self, buf: memoryview) -> None:
        self.members = len(buf) // 64 - LINES + 1
        self.words = np.ndarray(((LINES + self.members - 1) * 8,), np.int64, buffer=buf)

    @staticmethod
    def nbytes(members: int = 1) -> int:
        """Bytes of the block of a run of ``members`` members."""
        return (LINES + members - 1) * 64

    def _get(self, word: int) -> int:
        return int(load_acquire(self.words, word))

    # --- stopping ----------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Ask every process of the run to finish (supervisor)."""
        store_release(self.words, STOP, 1)

    def stop_requested(self) -> bool:
        """True once :meth:`request_stop` was called."""
        return bool(self._get(STOP))

    def mark_done(self) -> None:
        """Tell the workers that no more slots will be read (learner)."""
        store_release(self.words, DONE, 1)

    def run_over(self) -> bool:
        """True once a stop was requested or the learner is done: workers may exit."""
        return bool(self._get(STOP) or self._get(DONE))

    def mark_parked(self) -> None:
        """Tell the learner that no worker runs any more (supervisor)."""
        store_release(self.words, PARKED, 1)

    def parked(self) -> bool:
        """True once :meth:`mark_parked` was called."""
        return bool(self._get(PARKED))

    def park_at(self, slot: int | None) -> None:
        """Ask every worker to leave its state as it starts its first slot numbered
        ``slot`` or later, run-wide (learner; None: at none)."""
        store_release(self.words, PARK_SEQ, 0 if slot is None else slot + 1)

    def park_slot(self) -> int | None:
        """The run-wide slot from which on workers leave their state, or None."""
        marked = self._get(PARK_SEQ)
        return marked - 1 if marked else None

    # --- the learner's liveness and progress -------------------------------------------------
    def beat(self, now_ns: int) -> None:
        """Record that the learner is alive (learner)."""
        store_release(self.words, LEARNER_BEAT, now_ns)

    def last_beat(self) -> int:
        """The learner's last heartbeat (0 before the first)."""
        return self._get(LEARNER_BEAT)

    def record_step(self, step: int) -> None:
        """Record the env steps trained on so far (learner)."""
        store_release(self.words, LEARNER_STEP, step)

    def learner_step(self) -> int:
        """The env steps the learner last recorded (0 before it did)."""
        return self._get(LEARNER_STEP)

    # --- the periodic evaluations' verdict ---------------------------------------------------
    def start_eval(self, step: int) -> None:
        """Record that an evaluation of the weights of env step ``step`` starts now
        (supervisor); it has not beaten yet."""
        store_release(self.words, EVAL_BEAT, 0)
        store_release(self.words, EVAL_STEP, step + 1)

    def eval_step(self) -> int | None:
        """The env step whose weights the periodic evaluation running (or the last one)
        judges; None before the first."""
        marked = self._get(EVAL_STEP)
        return marked - 1 if marked else None

    def beat_eval(self, now_ns: int) -> None:
        """Record that the periodic evaluation running makes progress."""
        store_release(self.words, EVAL_BEAT, now_ns)

    def last_eval_beat(self) -> int:
        """The periodic evaluation's last heartbeat (0 before its first)."""
        return self._get(EVAL_BEAT)

    def mark_solved(self, step: int, member: int = 0) -> None:
        """Member ``member``'s weights of env step ``step`` reached the target return (the
        evaluation's process: the supervisor's, or the learner evaluating itself); a member
        already solved stays solved at its first step."""
        if self.member_solved_step(member) is None:
            store_release(self.words, SOLVED + 8 * member, step + 1)

    def member_solved_step(self, member: int) -> int | None:
        """The env step whose weights of member ``member`` reached the target return, once
        :meth:`mark_solved` was called for it; else None."""
        marked = self._get(SOLVED + 8 * member)
        return marked - 1 if marked else None

    def solved_step(self) -> int | None:
        """The env step at which the last member was solved, once every member is; else
        None."""
        steps = [self.member_solved_step(k) for k in range(self.members)]
        return None if None in steps else max(steps)
