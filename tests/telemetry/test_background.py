"""A tracker's calls in a thread of their own (fastrl.tracking.background): a call never
waits for the tracker, a failure is said once and ends its calls, a tracker that falls too
far behind drops calls (said once), and the end of a run waits for it only so long."""

from __future__ import annotations

import threading
import time

import pytest

from fastrl.tracking import background
from fastrl.tracking.background import Background


class Sink:
    name = "Fake"

    def __init__(self, gate: threading.Event | None = None, fail_at: int = -1) -> None:
        self.gate, self.fail_at, self.seen = gate, fail_at, []

    def scalars(self, value: int) -> None:
        if self.gate is not None:
            self.gate.wait(10)
        if value == self.fail_at:
            raise ConnectionError("server gone\nmore lines")
        self.seen.append(value)


def test_calls_never_wait_and_arrive_in_order():
    gate = threading.Event()
    tracker = Background(sink := Sink(gate))
    t0 = time.monotonic()
    for i in range(100):
        tracker.call("scalars", i)
    assert time.monotonic() - t0 < 0.5  # (the tracker is stuck on its first call)
    gate.set()
    assert tracker.close(10) and sink.seen == list(range(100))


def test_a_failure_is_said_once_and_ends_the_tracker_s_calls(capfd):
    tracker = Background(sink := Sink(fail_at=3))
    for i in range(10):
        tracker.call("scalars", i)
    assert not tracker.close(10)
    assert sink.seen == [0, 1, 2] and tracker.failed
    err = capfd.readouterr().err
    assert err.count("fastrl: Fake failed (ConnectionError: server gone)") == 1, err


def test_a_tracker_too_far_behind_drops_calls_and_says_so_once(capfd, monkeypatch):
    monkeypatch.setattr(background, "MAX_PENDING", 5)
    gate = threading.Event()
    tracker = Background(sink := Sink(gate))
    for i in range(20):
        tracker.call("scalars", i)
    gate.set()
    assert tracker.close(10)
    assert len(sink.seen) <= 6 and sink.seen == sorted(sink.seen)
    assert capfd.readouterr().err.count("calls behind; dropping") == 1


@pytest.mark.timeout(30)
def test_the_end_of_a_run_waits_for_a_stuck_tracker_only_so_long(capfd):
    tracker = Background(Sink(threading.Event()))  # (never set: stuck for 10 s)
    tracker.call("scalars", 0)
    t0 = time.monotonic()
    assert not tracker.close(0.3)
    assert time.monotonic() - t0 < 2
    assert "Fake did not finish within 0 s" in capfd.readouterr().err
