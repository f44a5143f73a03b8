"""A run's learning curve (fastrl.bench.curve): the rolling mean, the summary it prints, the
PNG, and the error for a run without episodes."""

from __future__ import annotations

import numpy as np

from fastrl.bench.curve import main, rolling_mean
from fastrl.telemetry.csvlog import CsvLog


def test_rolling_mean_is_the_mean_of_the_last_n_values():
    values = np.array([1.0, 2.0, 3.0, 10.0, 0.0])
    expected = [np.mean(values[max(0, i - 2):i + 1]) for i in range(5)]
    assert np.allclose(rolling_mean(values, 3), expected)


def test_a_run_s_curve_is_drawn_and_summarised(tmp_path, capsys):
    episodes, evals = CsvLog(tmp_path, "episodes.csv"), CsvLog(tmp_path, "evals.csv")
    episodes.write([(100 * i, float(i % 7), 50, 1000.0 + 6 * i) for i in range(1, 41)])
    evals.write([(2000, 1010.0, "learner", 4.5, 1.0, 3.0, 6.0, 50.0, 5)])
    assert main([str(tmp_path), "--window", "7"]) == 0
    out = capsys.readouterr().out
    # 40 episodes over 39 * 6 s; a full window of 7 consecutive i % 7 averages to 3, the
    # first six episodes (1..6) to 3.5
    assert "episodes 40, steps 4,000, minutes 3.90, best_mean 3.50, final_mean 3.00" in out
    assert "best_eval 4.50" in out
    assert (tmp_path / "curve.png").stat().st_size > 10_000


def test_a_run_without_episodes_is_an_error(tmp_path, capsys):
    CsvLog(tmp_path, "episodes.csv")
    assert main([str(tmp_path)]) == 2
    assert "has no episodes" in capsys.readouterr().err
