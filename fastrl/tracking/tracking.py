"""A run's trackers (``log.wandb``, ``log.mlflow``): what the run logs reaches each in a thread
of its own (fastrl.tracking.background); their run ids are kept in the run directory
(``wandb.id``, ``mlflow.id``), so that a resumed run continues the same tracked runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastrl.tracking.background import Background
from fastrl.tracking.sinks import MlflowRun, Rows, WandbRun

#: seconds the end of a run waits for each tracker to take what is queued (the uploads)
FINISH_TIMEOUT_S = 120.0


def _id_path(run_dir: Path, key: str) -> Path:
    return run_dir / f"{key}.id"


class _Started:
    """A tracker whose ``start`` also keeps the run id it returns in the run directory."""

    def __init__(self, sink: Any, run_dir: Path) -> None:
        self.sink, self.run_dir, self.name = sink, run_dir, sink.name

    def start(self, name: str, params: dict[str, Any]) -> None:
        path = _id_path(self.run_dir, self.sink.key)
        run_id = path.read_text().strip() if path.is_file() else None
        path.write_text(self.sink.start(self.run_dir, name, params, run_id) + "\n")

    def __getattr__(self, method: str) -> Any:
        return getattr(self.sink, method)


class Tracking:
    """The trackers of ``log`` (a fastrl.config.LogConfig) for the run in ``run_dir``,
    started with the resolved config ``params`` (dotted keys); without any, every call
    does nothing."""

    def __init__(self, log: Any, run_dir: Path, params: dict[str, Any]) -> None:
        sinks = [make(cfg) for make, cfg in ((WandbRun, log.wandb), (MlflowRun, log.mlflow))
                 if cfg.enabled]
        self._trackers = [Background(_Started(s, run_dir)) for s in sinks]
        for tracker in self._trackers:
            tracker.call("start", run_dir.name, params)

    def __bool__(self) -> bool:
        """Some tracker is on and has not failed (so far)."""
        return any(not t.failed for t in self._trackers)

    def scalars(self, rows: Rows) -> None:
        """Scalars at their env steps: ``[(step, {tag: value}), ...]``."""
        for tracker in self._trackers:
            tracker.call("scalars", rows)

    def finish(self, tables: list[Path], files: list[Path], failed: bool) -> None:
        """The run's ``tables`` (CSV files) and ``files`` (its model, ...), those that
        exist, then the end of each tracked run; waits at most :data:`FINISH_TIMEOUT_S`
        for each tracker."""
        for tracker in self._trackers:
            for path in tables:
                if path.is_file():
                    tracker.call("table", path)
            for path in files:
                if path.is_file():
                    tracker.call("artifact", path)
            tracker.call("finish", failed)
        for tracker in self._trackers:
            tracker.close(FINISH_TIMEOUT_S)
