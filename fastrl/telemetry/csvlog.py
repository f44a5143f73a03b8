"""Rows of a run's progress in CSV files of its directory: ``episodes.csv`` (every training
episode that ended) and ``evals.csv`` (every evaluation), one row per line as it happens."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path

from fastrl.core.files import telling_disk_full

#: file name -> its columns; the first is always the env step count of the row
COLUMNS: dict[str, tuple[str, ...]] = {
    "episodes.csv": ("step", "return", "length", "time"),
    "evals.csv": ("step", "time", "source", "return_mean", "return_std", "return_min",
                  "return_max", "length_mean", "episodes", "win_rate"),
}  # (win_rate: self-play's evaluations against the baseline; empty for other runs)


class CsvLog:
    """Appends rows to ``run_dir/name`` (columns: :data:`COLUMNS`) and flushes each batch of
    rows, so that a reader (the bench's ``solve`` scenario) sees them as soon as they are
    logged; ``extra`` columns follow :data:`COLUMNS`' (``group``: the row group of a run
    whose rows have groups). A resumed run passes its checkpoint's ``start_step``: the
    rows logged after it by the interrupted run are dropped, as TensorBoard's
    ``purge_step`` drops its scalars, so that no step appears twice."""

    def __init__(self, run_dir: Path, name: str, start_step: int = 0,
                 extra: tuple[str, ...] = ()) -> None:
        self.columns = COLUMNS[name] + extra
        self.path = path = Path(run_dir) / name
        kept: list[list[str]] = []
        if start_step and path.exists():
            with path.open(newline="") as f:
                kept = [row for row in list(csv.reader(f))[1:]
                        if row and float(row[0]) <= start_step]
        self._file = path.open("w", newline="")
        self._csv = csv.writer(self._file)
        self.write([self.columns, *kept])

    def write(self, rows: Iterable[Sequence[object]]) -> None:
        """Append ``rows`` (values in :attr:`columns` order) and flush them; a full disk
        raises :class:`~fastrl.core.files.DiskFull`."""
        with telling_disk_full(self.path):
            self._csv.writerows(rows)
            self._file.flush()

    def close(self) -> None:
        """Close the file (closed even when its last flush fails on a full disk, which
        raises :class:`~fastrl.core.files.DiskFull`)."""
        with telling_disk_full(self.path):
            self._file.close()
