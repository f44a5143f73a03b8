"""The run's episode and evaluation CSV files (fastrl.telemetry.csvlog)."""

from __future__ import annotations

import csv

from fastrl.config import LogConfig
from fastrl.telemetry.csvlog import CsvLog
from fastrl.telemetry.metrics import MetricsLogger


def rows(path):
    with path.open(newline="") as f:
        return list(csv.reader(f))


def test_rows_are_readable_as_soon_as_written(tmp_path):
    log = CsvLog(tmp_path, "episodes.csv")
    log.write([[10, 1.5, 3, 100.0]])
    assert rows(tmp_path / "episodes.csv") == [["step", "return", "length", "time"],
                                               ["10", "1.5", "3", "100.0"]]
    log.close()


def test_a_resumed_run_drops_the_rows_after_its_checkpoint(tmp_path):
    log = CsvLog(tmp_path, "episodes.csv")
    log.write([[step, 1.0, 1, 0.0] for step in (5, 10, 15)])
    log.close()
    log = CsvLog(tmp_path, "episodes.csv", start_step=10)
    log.write([[12, 2.0, 1, 0.0]])
    log.close()
    assert [r[0] for r in rows(tmp_path / "episodes.csv")[1:]] == ["5", "10", "12"]


def test_the_logger_writes_every_episode_and_evaluation(tmp_path):
    logger = MetricsLogger(tmp_path, LogConfig(tensorboard=False, console=False), 100)
    logger.episodes({"step": [4, 8], "return": [1.0, 2.0], "length": [4, 4],
                     "time": [1.0, 2.0]})
    logger.evaluation(8, {"return_mean": 3.0, "return_std": 0.0, "return_min": 3.0,
                          "return_max": 3.0, "length_mean": 3.0, "episodes": 2.0})
    logger.close()
    assert rows(tmp_path / "episodes.csv")[1:] == [["4", "1.0", "4", "1.0"],
                                                   ["8", "2.0", "4", "2.0"]]
    evals = rows(tmp_path / "evals.csv")
    assert evals[1][0] == "8" and evals[1][2] == "eval" and evals[1][3] == "3.0"
