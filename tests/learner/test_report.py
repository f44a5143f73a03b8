"""The learner's metrics reports (fastrl.learner.report): statistics summed per report,
episode ends and policy lags from the host copies of the slots."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fastrl.learner.report import ReportWindow


def slot(versions, ended=(), returns=None):
    """Host arrays of a [T=len(versions), E=1] slot whose episodes end at ``ended``."""
    n = len(versions)
    term = np.zeros((n, 1), bool)
    term[list(ended), 0] = True
    ret = np.arange(n, dtype=np.float32)[:, None] if returns is None else returns
    return {"terminated": term, "truncated": np.zeros((n, 1), bool), "episode_return": ret,
            "episode_length": np.arange(n, dtype=np.int32)[:, None] + 1,
            "policy_version": np.asarray(versions, np.int64)[:, None]}


def test_update_statistics_are_averaged_over_the_window():
    w = ReportWindow()
    w.add_update({"policy_loss": torch.tensor(1.0), "grad_norm": torch.tensor(4.0)})
    w.add_update({"policy_loss": torch.tensor(3.0), "grad_norm": torch.tensor(0.0)})
    stats = w.stats()
    assert stats["policy_loss"] == pytest.approx(2.0) and stats["grad_norm"] == 2.0
    assert w.updates == 2
    w.reset()
    assert w.stats() == {} and w.updates == 0


def test_episodes_and_policy_lags_of_the_slots_noted():
    w = ReportWindow()
    w.note_slots(slot([5, 5, 4], ended=[1]), version=6, steps_before=0)  # lags 1, 1, 2
    w.note_slots(slot([6, 6, 6], ended=[0, 2]), version=6, steps_before=3)  # lags 0, 0, 0
    stats = w.stats()
    assert stats["policy_lag/histogram"] == [3, 2, 1]
    assert stats["policy_lag"] == 2 and stats["policy_lag_mean"] == pytest.approx(4 / 6)
    assert stats["episode/count"] == 3
    assert stats["episode/return_mean"] == pytest.approx((1 + 0 + 2) / 3)
    assert stats["episode/length_mean"] == pytest.approx((2 + 1 + 3) / 3)


def test_every_ended_episode_is_kept_with_its_own_return_step_and_time():
    # [T=3, N=2]: env 1 ends at row 0, env 0 at row 1, both at row 2
    term = np.array([[False, True], [True, False], [True, True]])
    ret = np.array([[1, 10], [2, 20], [30, 40]], np.float32)
    host = {"terminated": term, "truncated": np.zeros_like(term), "episode_return": ret,
            "episode_length": ret.astype(np.int32), "policy_version": np.zeros((3, 2), np.int64)}
    w = ReportWindow()
    w.note_slots(host, version=0, steps_before=100)
    episodes = w.episodes()
    assert episodes["return"] == [10, 2, 30, 40]  # in the order they ended
    assert episodes["step"] == [102, 104, 106, 106]  # 100 + (row + 1) * 2 envs
    assert episodes["length"] == [10, 2, 30, 40]
    assert len(episodes["time"]) == 4 and min(episodes["time"]) > 1e9  # Unix seconds
    w.reset()
    assert w.episodes() == {"step": [], "return": [], "length": [], "time": []}


def test_a_window_without_episode_ends_reports_no_episode_statistics():
    w = ReportWindow()
    w.note_slots(slot([0, 0]), version=0, steps_before=0)
    stats = w.stats()
    assert not any(k.startswith("episode/") for k in stats)
    assert stats["policy_lag"] == 0 and stats["policy_lag/histogram"] == [2]


def test_a_nan_statistic_is_averaged_over_the_updates_that_had_one():
    # explained variance is NaN for a batch of equal returns: it must not blank the report
    w = ReportWindow()
    nan = torch.tensor(float("nan"))
    w.add_update({"explained_variance": nan, "value_loss": torch.tensor(2.0)})
    w.add_update({"explained_variance": torch.tensor(0.5), "value_loss": torch.tensor(4.0)})
    stats = w.stats()
    assert stats["explained_variance"] == pytest.approx(0.5) and stats["value_loss"] == 3.0
    w.reset()
    w.add_update({"explained_variance": nan})
    assert np.isnan(w.stats()["explained_variance"])


def test_a_multi_agent_batch_reports_each_agent_group_and_no_padding():
    # [T=2, N=3] rows of one env of agents adversary_0, adversary_1, good_0 (run-wide rows
    # 3..5: the second env): padding (weight 0) ends every step and counts for nothing
    term = np.array([[True, False, True], [True, True, True]])
    active = np.array([[True, True, False], [False, True, True]])
    ret = np.array([[1, 5, 99], [99, 7, 20]], np.float32)
    host = {"terminated": term, "truncated": np.zeros_like(term), "episode_return": ret,
            "episode_length": np.ones((2, 3), np.int32), "weight": active,
            "env_id": np.array([[3, 4, 5]] * 2, np.int32),
            "policy_version": np.zeros((2, 3), np.int64)}
    w = ReportWindow(("adversary", "adversary", "good"))
    w.note_slots(host, version=0, steps_before=0)
    stats = w.stats()
    assert stats["episode/count"] == 3 and stats["episode/return_mean"] == pytest.approx(28 / 3)
    assert stats["episode/adversary/count"] == 2
    assert stats["episode/adversary/return_mean"] == pytest.approx(4)
    assert stats["episode/good/return_max"] == 20
