"""The metrics logger when the disk fills up under it, and its console lines on a narrow
terminal (fastrl.telemetry.metrics)."""

from __future__ import annotations

import errno
import threading
import time

import pytest
from tensorboard.summary.writer import record_writer

from fastrl.config import LogConfig
from fastrl.core.files import DiskFull
from fastrl.telemetry.events import RunEvents
from fastrl.telemetry.metrics import MetricsLogger


def test_tensorboard_s_thread_on_a_full_disk_is_one_error_and_no_traceback(
        tmp_path, monkeypatch, capfd):
    shown, before = [], threading.excepthook  # (what would print a thread's traceback)
    threading.excepthook = lambda args: shown.append(args.exc_value)
    try:
        logger = MetricsLogger(tmp_path, LogConfig(console=False), 100)

        def no_room(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(record_writer.RecordWriter, "write", no_room)
        deadline = time.monotonic() + 30
        with pytest.raises(DiskFull) as caught:  # the writer's thread fails; a later call
            while time.monotonic() < deadline:  # says so
                logger.update(1, {"policy_loss": 0.5})
                time.sleep(0.01)
    finally:
        threading.excepthook = before
    assert shown == []
    assert caught.value.path.parent == tmp_path / "tb"
    assert caught.value.path.name.startswith("events.out.tfevents.")
    logger.update(2, {"policy_loss": 0.5})  # TensorBoard is written no more...
    logger.episodes({"step": [2], "return": [1.0], "length": [2], "time": [0.0]})
    logger.close()  # ...and closing does not raise again
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception in thread" not in err, err
    assert (tmp_path / "episodes.csv").read_text().splitlines()[-1].startswith("2,1.0,2,")


def test_console_lines_stay_whole_on_a_narrow_terminal(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("COLUMNS", "40")
    logger = MetricsLogger(tmp_path, LogConfig(tensorboard=False), 100_000)
    path = str(tmp_path / "checkpoints" / "000003-step25088")
    logger.checkpoint(25_088, path)
    logger.event(25_088, "worker 1 (pid 4242) was killed by SIGKILL; started worker 1 again")
    logger.close()
    lines = capfd.readouterr().err.splitlines()
    assert f"checkpoint @ 25,088 steps: {path}" in lines, lines
    assert "supervisor @ 25,088 steps: worker 1 (pid 4242) was killed by SIGKILL; started " \
           "worker 1 again" in lines, lines


def test_event_lines_count_the_learner_s_steps_between_its_reports(tmp_path):
    logger = MetricsLogger(tmp_path, LogConfig(tensorboard=False, console=False), 100)
    learner = {"step": 0}
    events = RunEvents(logger, learner_step=lambda: learner["step"])
    events.put(("update", 512, {}))
    learner["step"] = 2048  # trained on since its last report
    assert events.now() == 2048
    events.put(("checkpoint", 2048, {"path": "x"}))
    events.put(("disk_full", 0, {"error": "no space left on device writing y"}))
    assert events.disk_full == "no space left on device writing y" and events.step == 2048
    learner["step"] = 0  # (a learner restarted from nothing has recorded none yet)
    assert events.now() == 2048
    logger.close()


def test_console_lines_show_a_population_s_best_median_and_worst(tmp_path, monkeypatch,
                                                                 capfd):
    monkeypatch.setenv("COLUMNS", "200")
    logger = MetricsLogger(tmp_path, LogConfig(tensorboard=False), 100_000, grouped=True)
    logger.update(512, {"episode/return_mean": 30.0, "episode/member0/return_mean": 10.0,
                        "episode/member1/return_mean": 20.0,
                        "episode/member2/return_mean": 60.0})
    logger.update(1024, {"episode/return_mean": 70.0,  # (member 0 ended no episode here)
                         "episode/member1/return_mean": 80.0,
                         "episode/member2/return_mean": 90.0})
    logger.evaluation(1024, {"return_mean": 50.0, "return_std": 5.0, "return_min": 1.0,
                             "best_return_mean": 90.0, "median_return_mean": 45.0,
                             "worst_return_mean": 12.0, "iqm_return": 47.5,
                             "iqm_return_ci_low": 20.25, "iqm_return_ci_high": 80.0})
    logger.close()
    err = capfd.readouterr().err
    assert "return 80.0 (best 90.0, worst 10.0)" in err, err
    assert "eval @ 1,024 steps: return 50.0 ± 5.0 (best 90.0, median 45.0, worst 12.0; IQM " \
           "47.5 [20.2, 80.0])" in err, err
