"""Stop requests: SIGINT/SIGTERM, :meth:`Supervisor.stop` and failed callbacks, as flags the
supervisor and the runtimes read."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fastrl.core.forkserver import STOP_SIGNALS


class StopRequests:
    """What asked the run to stop. The first SIGINT or SIGTERM asks for a graceful stop; a
    second one forces it (stop waiting for anybody). ``callback_failed`` tells whether a
    callback's exception asked for a stop."""

    def __init__(self, callback_failed: Callable[[], bool] = lambda: False) -> None:
        self.signal: int | None = None  # the first stop signal
        self.asked = False  # stop() from an embedding program
        self.forced = False  # a second stop signal
        self.callback_failed = callback_failed
        # Called at the first stop request, from the signal handler or ask()'s thread: the
        # serial runtime sets the run's STOP flag here, which its learner looks at even in
        # the middle of an evaluation (one shared-memory store: safe in a handler).
        self.on_request: Callable[[], None] | None = None
        # The serial runtime runs the user's code (envs, callbacks) in this thread: a second
        # signal must interrupt it there, since it may never look at the flags.
        self.in_user_code = False

    def requested(self) -> bool:
        """A signal, :meth:`ask` or a failed callback asked the run to stop."""
        return self.signal is not None or self.asked or self.callback_failed() or self.forced

    def ask(self) -> None:
        """Ask for a graceful stop, as a first SIGINT would (any thread)."""
        self.asked = True
        self._tell()

    def _tell(self) -> None:
        if self.on_request is not None:
            self.on_request()

    def _on_signal(self, signum: int, frame: Any) -> None:
        # Raise only while the serial runtime runs the user's code in this thread: never
        # inside the cleanup after a run, which clears in_user_code first.
        if self.signal is None:
            self.signal = signum
            self._tell()
        else:
            self.forced = True
            if self.in_user_code:
                self.in_user_code = False
                raise KeyboardInterrupt

    @contextmanager
    def handled(self) -> Iterator[None]:
        """SIGINT and SIGTERM set these flags meanwhile (from the main thread only: signal
        handlers cannot be installed from another)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        try:
            yield
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
