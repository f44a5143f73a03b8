"""An image too small for the Nature CNN (a MiniGrid-like (1, 3, 7) uint8 leaf) trains as
it comes: the run picks a CNN that reads it, and says which at start-up and in
``describe``."""

from __future__ import annotations

from helpers import ONE_WORKER, TINY, last_json, train_main

from fastrl.config import load_config
from fastrl.describe import describe, render
from fastrl.plan import plan_run

GRID = ["env.fn=scripted_envs:SmallGrid", "algo.target_return=null"]
NOTE = "grid: 3x7 pixels, below the nature CNN's 36x36; the small CNN reads it"


def test_a_small_grid_trains_as_it_comes_with_a_note(tmp_path, capfd):
    proc = train_main([*TINY, *ONE_WORKER, *GRID, "algo.total_steps=512"], tmp_path, capfd)
    assert proc.returncode == 0, proc.stderr
    assert last_json(proc.stdout)["global_step"] == 512
    assert f"  note: {NOTE}" in proc.stderr


def test_describe_shows_which_cnn_reads_each_image():
    report = describe(plan_run(load_config(None, [*TINY, *GRID])))
    assert report["learner"]["images"] == [{"input": "grid", "pixels": "3x7", "cnn": "small"}]
    assert report["learner"]["encoder_notes"] == [NOTE]
    assert "grid (3x7 pixels): the small CNN" in render(report)
    flat = describe(plan_run(load_config(None, [*TINY, *GRID, "algo.encoder=flat"])))
    assert flat["learner"]["images"] == [] and flat["learner"]["encoder_notes"] == []
