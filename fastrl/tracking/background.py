"""One tracker's calls made in a thread of its own, in order, at a low priority, so that a
slow or unreachable tracking server never stops, slows or hangs the process that logs (the
supervisor), nor takes the cores from the learner and the workers: a call only queues. The
first failure is said once on stderr, and the tracker gets no more calls; the run's own
files (TensorBoard, CSV, checkpoints) are complete either way."""

from __future__ import annotations

import os
import queue
import sys
import threading
from contextlib import suppress
from typing import Any

MAX_PENDING = 10_000  # calls queued before new ones are dropped (said once)
NICENESS = 10  # of a tracker's thread: it runs on what the run leaves of the cores


class Background:
    """``sink``'s methods called in a daemon thread named after it, in the order
    :meth:`call` queued them; :meth:`close` waits for the queue at most ``timeout_s``."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.failed = False
        self.dropped = 0  # calls dropped for the tracker being too far behind
        self._queue: queue.Queue = queue.Queue(MAX_PENDING)
        self._thread = threading.Thread(target=self._run, name=f"fastrl-{sink.name}",
                                         daemon=True)
        self._thread.start()

    def call(self, method: str, *args: Any) -> None:
        """Queue ``sink.method(*args)``; dropped when the tracker is :data:`MAX_PENDING`
        calls behind (said the first time), and after it failed."""
        if self.failed:
            return
        try:
            self._queue.put_nowait((method, args))
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1:
                say(f"{self.sink.name} is {MAX_PENDING:,} calls behind; dropping what this "
                    "run logs to it while it is (the run's own files keep everything)")

    def close(self, timeout_s: float) -> bool:
        """Let the queued calls finish, for at most ``timeout_s``; False (said) where the
        tracker did not finish in time (its thread is left to end with the process)."""
        try:
            self._queue.put((None, ()), timeout=timeout_s)
        except queue.Full:
            pass
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            say(f"{self.sink.name} did not finish within {timeout_s:.0f} s; left to end in "
                "the background")
            return False
        return not self.failed

    def _run(self) -> None:
        with suppress(OSError, AttributeError):  # (Linux niceness is per thread; elsewhere none)
            # A tracker's work (and the service process W&B starts from here, which
            # inherits it) yields the cores to the learner and the workers.
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
        while True:
            method, args = self._queue.get()
            if method is None:
                return
            if self.failed:
                continue
            try:
                getattr(self.sink, method)(*args)
            except Exception as e:  # (a tracker's failure is its own, never the run's)
                self.failed = True
                first = next((line for line in str(e).splitlines() if line.strip()), "")
                say(f"{self.sink.name} failed ({type(e).__name__}: {first[:200]}); the run goes "
                    f"on and logs no more to {self.sink.name}")


def say(text: str) -> None:
    """One line on stderr, as the run's other notes."""
    print(f"fastrl: {text}", file=sys.stderr, flush=True)
