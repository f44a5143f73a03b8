"""Checkpoints written off the learner's critical path: the learner snapshots what it saves
(a copy of every tensor and array) and a thread writes, fsyncs and hashes the files while
training goes on. A checkpoint stays complete or absent (fastrl.checkpoint writes it into a
temporary folder and renames it), whenever the process dies."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class BackgroundWrite:
    """At most one checkpoint write at a time, on a thread of its own; a write returns what
    the learner reports of it once it is done."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._done: Any = None
        self._error: BaseException | None = None

    def start(self, write: Callable[[], Any]) -> None:
        """Start ``write()``; the write before it must be over (:meth:`wait`)."""
        if self._thread is not None:
            raise RuntimeError("a checkpoint write is still in progress")

        def run() -> None:
            try:
                self._done = write()
            except BaseException as e:  # re-raised in the learner's thread (poll, wait)
                self._error = e

        self._thread = threading.Thread(target=run, name="fastrl checkpoint", daemon=True)
        self._thread.start()

    def poll(self) -> Any:
        """What a write that has finished since the last call returned (None: none has);
        a write's error is raised here."""
        if self._thread is not None and not self._thread.is_alive():
            return self.wait()
        return None

    def wait(self) -> Any:
        """Wait for the write in progress; what it returned (None: there was none)."""
        if self._thread is None:
            return None
        self._thread.join()
        self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error
        done, self._done = self._done, None
        return done
