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
    w.note_slots(slot([5, 5, 4], ended=[1]), version=6)  # lags 1, 1, 2
    w.note_slots(slot([6, 6, 6], ended=[0, 2]), version=6)  # lags 0, 0, 0
    stats = w.stats()
    assert stats["policy_lag/histogram"] == [3, 2, 1]
    assert stats["policy_lag"] == 2 and stats["policy_lag_mean"] == pytest.approx(4 / 6)
    assert stats["episode/count"] == 3
    assert stats["episode/return_mean"] == pytest.approx((1 + 0 + 2) / 3)
    assert stats["episode/length_mean"] == pytest.approx((2 + 1 + 3) / 3)


def test_a_window_without_episode_ends_reports_no_episode_statistics():
    w = ReportWindow()
    w.note_slots(slot([0, 0]), version=0)
    stats = w.stats()
    assert not any(k.startswith("episode/") for k in stats)
    assert stats["policy_lag"] == 0 and stats["policy_lag/histogram"] == [2]


def test_ppo_update_statistics_stay_on_the_device():
    from gymnasium import spaces

    from fastrl.config import load_config
    from fastrl.models.policy import ActorCritic

    obs_space, act_space = spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(2)
    for name in ("ppo", "appo"):
        cfg = load_config(None, [f"algo.name={name}", "algo.num_minibatches=2"]).algo
        policy = ActorCritic(obs_space, act_space, [8])
        algo = cfg.algorithm.make_update(cfg, policy, obs_space, act_space, torch.device("cpu"))
        T, N = 5, 4
        batch = {"obs": torch.rand(T, N, 3), "action": torch.randint(0, 2, (T, N)),
                 "reward": torch.ones(T, N), "terminated": torch.zeros(T, N, dtype=bool),
                 "truncated": torch.zeros(T, N, dtype=bool),
                 "log_prob": torch.full((T, N), -0.69), "value": torch.zeros(T, N),
                 "final_obs": torch.full((T, N, 3), float("nan")),  # stale: never picked
                 "bootstrap_obs": torch.rand(N, 3)}
        stats = algo.update(batch, 1e-3)
        assert all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in stats.values())
        assert all(torch.isfinite(v) for v in stats.values()), (name, stats)


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
