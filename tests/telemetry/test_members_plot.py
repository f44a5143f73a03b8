"""A population's training curves (fastrl.telemetry.members_plot): each member's windowed
return at its own steps, and the IQM band across members."""

from __future__ import annotations

import numpy as np

from fastrl.telemetry.members_plot import WINDOW, iqm_band, member_curves, plot_members


def _episodes(path, rows) -> None:
    path.write_text("step,return,length,time,group\n" + "".join(
        f"{step},{ret},{ret},0.0,member{k}\n" for step, ret, k in rows))


def test_each_member_s_curve_is_its_windowed_return_at_its_own_steps(tmp_path):
    # member 0 ends an episode of return 10*i at run step 200*i, member 1 of 1.0 at each
    rows = [(200 * i, 10.0 * i, 0) for i in range(1, 51)] + \
        [(200 * i, 1.0, 1) for i in range(1, 51)]
    _episodes(tmp_path / "episodes.csv", sorted(rows))
    steps, curves = member_curves(tmp_path / "episodes.csv", 2, points=10)
    assert steps[-1] == 10_000 / 2  # (a member's steps: the run's over the members)
    # at member step 5,000 (run step 10,000) member 0's last WINDOW episodes are 31..50
    assert curves[0, -1] == np.mean([10.0 * i for i in range(51 - WINDOW, 51)])
    assert curves[1, -1] == 1.0
    iqm, low, high = iqm_band(curves)
    assert np.all((low <= iqm) & (iqm <= high))
    assert plot_members(tmp_path, 2).stat().st_size > 0


def test_points_before_a_member_s_first_episode_have_no_band(tmp_path):
    _episodes(tmp_path / "episodes.csv", [(100, 5.0, 0), (900, 7.0, 1), (1000, 9.0, 0)])
    _, curves = member_curves(tmp_path / "episodes.csv", 2, points=4)
    assert np.isnan(curves[1, 0]) and not np.isnan(curves[0, 0])
    iqm, _, _ = iqm_band(curves)
    assert np.isnan(iqm[0]) and not np.isnan(iqm[-1])
