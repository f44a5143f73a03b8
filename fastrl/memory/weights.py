"""Policy weights in shared memory under a seqlock, plus the run's control flags.

Header lines (one int64 per 64-byte line): ``SEQ`` (odd while the learner writes),
``VERSION`` (number of learner updates behind these weights), ``STOP`` (the supervisor asks
every process to stop), ``DONE`` (the learner needs no more data), ``LEARNER_BEAT`` (the
learner's heartbeat, monotonic ns), ``PARKED`` (the supervisor: every worker has exited after
the run was over, so the rings and the workers' parked states are final), ``SOLVED`` (the
supervisor: an evaluation of the weights at env step ``SOLVED - 1`` reached the target
return), ``EVAL_BEAT`` (the heartbeat of the periodic evaluation running, monotonic ns; 0
before its first step), ``EVAL_STEP`` (the supervisor: env step + 1 of the weights that
evaluation judges; 0 before the first), ``LEARNER_STEP`` (the env steps the learner has
trained on, as of its last published weights: what the supervisor's event lines count). Then
the flat float32 parameter vector.

The learner is the only writer. A reader copies the vector between two reads of ``SEQ``
and keeps the copy only when both reads are the same even number: a copy that overlapped a
write is retried, never used.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fastrl.memory.atomics import fence, load_acquire, store_release
from fastrl.memory.wait import wait_until

SEQ, VERSION, STOP, DONE, LEARNER_BEAT, PARKED = 0, 8, 16, 24, 32, 40
SOLVED, EVAL_BEAT, EVAL_STEP, LEARNER_STEP = 48, 56, 64, 72
HEADER_BYTES = 10 * 64


class SharedWeights:
    """Seqlock-protected flat parameter vector; one writer, any number of readers."""

    def __init__(self, buf: memoryview, num_params: int) -> None:
        self.hdr = np.ndarray((HEADER_BYTES // 8,), np.int64, buffer=buf)
        self.params = np.ndarray((num_params,), np.float32, buffer=buf, offset=HEADER_BYTES)

    @staticmethod
    def nbytes(num_params: int) -> int:
        """Bytes of the segment for ``num_params`` float32 parameters."""
        return HEADER_BYTES + 4 * num_params

    def write(self, flat: np.ndarray, version: int) -> None:
        """Publish ``flat`` as policy ``version`` (learner only)."""
        seq = int(self.hdr[SEQ])
        store_release(self.hdr, SEQ, seq + 1)  # odd: readers will retry
        fence()  # keep the parameter stores below the odd SEQ
        self.params[:] = flat
        self.hdr[VERSION] = version
        store_release(self.hdr, SEQ, seq + 2)

    def _even_seq(self, should_stop: Callable[[], bool]) -> int:
        """``SEQ`` once no write is in progress (raises Stopped if the run stops first,
        e.g. because the learner died mid-write)."""
        seq = load_acquire(self.hdr, SEQ)
        while seq & 1:
            # The value returned must be the one checked: a fresh load could be odd again.
            wait_until(lambda: not load_acquire(self.hdr, SEQ) & 1, should_stop)
            seq = load_acquire(self.hdr, SEQ)
        return seq

    def version(self, should_stop: Callable[[], bool] = lambda: False) -> int:
        """Version of the last completed write (-1 before the first)."""
        while True:
            s1 = self._even_seq(should_stop)
            v = int(self.hdr[VERSION])
            fence()
            if s1 == self.hdr[SEQ]:
                return v if s1 else -1

    def read_into(self, out: np.ndarray, should_stop: Callable[[], bool] = lambda: False) -> int:
        """Copy a consistent vector into ``out``; returns its version."""
        while True:
            s1 = self._even_seq(should_stop)
            if s1 == 0:
                raise RuntimeError("no weights were published yet; wait for version() >= 0")
            np.copyto(out, self.params)
            v = int(self.hdr[VERSION])
            fence()
            if s1 == self.hdr[SEQ]:
                return v  # SEQ unchanged: no write overlapped the copy

    def request_stop(self) -> None:
        """Ask every process of the run to finish (supervisor)."""
        store_release(self.hdr, STOP, 1)

    def stop_requested(self) -> bool:
        """True once :meth:`request_stop` was called."""
        return bool(load_acquire(self.hdr, STOP))

    def mark_done(self) -> None:
        """Tell the workers that no more slots will be read (learner)."""
        store_release(self.hdr, DONE, 1)

    def run_over(self) -> bool:
        """True once a stop was requested or the learner is done: workers may exit."""
        return bool(load_acquire(self.hdr, STOP) or load_acquire(self.hdr, DONE))

    def mark_parked(self) -> None:
        """Tell the learner that no worker runs any more (supervisor)."""
        store_release(self.hdr, PARKED, 1)

    def parked(self) -> bool:
        """True once :meth:`mark_parked` was called."""
        return bool(load_acquire(self.hdr, PARKED))

    def mark_solved(self, step: int) -> None:
        """Tell the learner that its weights of env step ``step`` reached the target return
        (supervisor, after an evaluation in its own process)."""
        store_release(self.hdr, SOLVED, step + 1)

    def solved_step(self) -> int | None:
        """The env step whose weights reached the target return, once
        :meth:`mark_solved` was called; else None."""
        marked = int(load_acquire(self.hdr, SOLVED))
        return marked - 1 if marked else None

    def start_eval(self, step: int) -> None:
        """Record that an evaluation of the weights of env step ``step`` starts now
        (supervisor); it has not beaten yet."""
        store_release(self.hdr, EVAL_BEAT, 0)
        store_release(self.hdr, EVAL_STEP, step + 1)

    def eval_step(self) -> int | None:
        """The env step whose weights the periodic evaluation running (or the last one)
        judges; None before the first."""
        marked = int(load_acquire(self.hdr, EVAL_STEP))
        return marked - 1 if marked else None

    def beat_eval(self, now_ns: int) -> None:
        """Record that the periodic evaluation running makes progress."""
        store_release(self.hdr, EVAL_BEAT, now_ns)

    def last_eval_beat(self) -> int:
        """The periodic evaluation's last heartbeat (0 before its first)."""
        return int(load_acquire(self.hdr, EVAL_BEAT))

    def beat(self, now_ns: int) -> None:
        """Record that the learner is alive (learner)."""
        store_release(self.hdr, LEARNER_BEAT, now_ns)

    def last_beat(self) -> int:
        """The learner's last heartbeat (0 before the first)."""
        return int(load_acquire(self.hdr, LEARNER_BEAT))

    def record_step(self, step: int) -> None:
        """Record the env steps trained on so far (learner)."""
        store_release(self.hdr, LEARNER_STEP, step)

    def learner_step(self) -> int:
        """The env steps the learner last recorded (0 before it did)."""
        return int(load_acquire(self.hdr, LEARNER_STEP))
