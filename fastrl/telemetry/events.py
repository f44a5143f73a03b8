"""Where the learner's messages go in the main process: the metrics logger and callbacks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastrl.callbacks import Callback
from fastrl.telemetry.metrics import MetricsLogger


def custom_scalars(callback: Callback, hook: str, extra: object) -> dict[str, float]:
    """What a hook returned, checked: a dict of names to real numbers."""
    where = f"{type(callback).__name__}.{hook} returned {extra!r}"[:200]
    if not isinstance(extra, dict):
        raise TypeError(f"{where}: a hook returns None or a dict of scalars to log")
    try:
        return {str(k): float(v) for k, v in extra.items()}
    except (TypeError, ValueError):
        raise TypeError(f"{where}: custom scalars must be real numbers") from None


class RunEvents:
    """Routes ``(kind, step, payload)`` messages (``update``, ``episodes``, ``eval``,
    ``checkpoint``, ``disk_full``, ``done``) to the :class:`MetricsLogger` and the
    :class:`~fastrl.callbacks.Callback` s, and keeps what the run's result reports.
    ``health`` adds the supervisor's scalars to every update; ``learner_step`` reads the
    learner's step count between its messages (:meth:`now`). The first exception a
    callback raises is kept in :attr:`error` (the caller stops the run and re-raises it).

    Its :meth:`put` takes the same messages as the learner's queue, so the serial runtime
    hands it to the learner directly.
    """

    def __init__(self, logger: MetricsLogger, callbacks: Sequence[Callback] = (),
                 health: Callable[[], dict[str, float]] = dict, step: int = 0,
                 learner_step: Callable[[], int] = lambda: 0) -> None:
        self.logger, self.callbacks, self.health = logger, list(callbacks), health
        self.step = step  # of the last message
        self.learner_step = learner_step
        self.last_metrics: dict[str, float] = {}
        self.last_checkpoint: str | None = None
        self.checkpoints: list[str] = []  # every checkpoint written, in order
        self.final: dict[str, Any] | None = None
        self.disk_full: str | None = None
        self.error: BaseException | None = None

    def now(self) -> int:
        """The newest env step known, for the supervisor's own event lines: the learner's
        (it reports only every ``log.metrics_every_s``) or the last message's."""
        return max(self.step, self.learner_step())

    def put(self, message: tuple[str, int, dict[str, Any]]) -> None:
        """Handle one message."""
        self.handle(*message)

    def handle(self, kind: str, step: int, payload: dict[str, Any]) -> None:
        """Log one message and call the callbacks' hook for it."""
        if kind == "disk_full":  # the learner's last word: what it could not write
            self.disk_full = payload["error"]
            return
        self.step = step
        if kind == "update":
            payload.update(self.health())
            self.logger.update(step, payload)
            self.last_metrics = payload
            self._call("on_update", step, payload)
        elif kind == "episodes":
            self.logger.episodes(payload)
        elif kind == "eval":
            self.evaluation(step, payload, "learner")
        elif kind == "checkpoint":
            self.last_checkpoint = payload["path"]
            self.checkpoints.append(payload["path"])
            self.logger.checkpoint(step, payload["path"])
            self._call("on_checkpoint", step, payload["path"])
        else:
            self.final = payload

    def evaluation(self, step: int, result: dict[str, float], source: str) -> None:
        """Log an evaluation by the learner or (``source``: its folder) of a checkpoint."""
        self.logger.evaluation(step, result, "eval" if source == "learner" else "eval_ckpt")
        self._call("on_eval", step, result, source)

    def _call(self, hook: str, step: int, *args: Any) -> None:
        for callback in self.callbacks:
            try:  # the user's code: an error stops the run, fit() re-raises it after cleanup
                extra = getattr(callback, hook)(step, *args)
                if extra is not None:
                    self.logger.custom(step, custom_scalars(callback, hook, extra))
            except Exception as e:
                if self.error is None:
                    self.error = e
