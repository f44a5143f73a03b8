"""The bench harness in one process: its arithmetic, its options, its plot, the learner
scenario's synthetic slots and loopback ring. (The command and a short run of every
scenario: tests/cli/test_bench_cli.py.)"""

from __future__ import annotations

import os

import numpy as np
import pytest

from fastrl.bench.__main__ import median, parse_args
from fastrl.bench.fastrl_runs import window_costs
from fastrl.bench.learner import LoopbackRing, learner_config, synthetic_slot
from fastrl.bench.measure import Snapshot, skipped, summarize
from fastrl.bench.report import plot_scaling
from fastrl.envs.atari import AtariSettings
from fastrl.envs.envpool import envpool_atari
from fastrl.memory.control import RunControl
from fastrl.plan import plan_run


def test_steps_per_cpu_second_from_known_process_times():
    start = Snapshot(t=10.0, steps=1_000, cpu={1: 5.0, 2: 1.0, 3: 0.5},
                     stages={"act_ns": 0, "env_ns": 0, "fill_ns": 0})
    end = Snapshot(t=12.0, steps=9_000, cpu={1: 6.5, 2: 3.0, 3: 0.5, 4: 9.0},
                   stages={"act_ns": 1_000, "env_ns": 6_000, "fill_ns": 10_000})
    r = summarize("x", "collect", 2, 8, start, end)
    # pid 4 appeared after the window opened: not counted; pid 3 idle: counts 0
    assert r.cpu_s == pytest.approx(1.5 + 2.0)
    assert r.wall_s == pytest.approx(2.0) and r.steps == 8_000
    assert r.steps_per_sec == pytest.approx(4_000)
    assert r.steps_per_cpu_s == pytest.approx(8_000 / 3.5)
    assert r.cores_used == pytest.approx(1.75)
    assert r.stage_share == pytest.approx({"act": 0.1, "env": 0.6, "write": 0.3})


def test_window_costs_split_cores_by_role_and_time_by_slot():
    stages = {"fill_ns": 0, "act_ns": 0, "env_ns": 0, "slots": 10, "relay_get": 0,
              "relay_copy": 0, "relay_slots": 10}
    start = Snapshot(t=0.0, steps=1000, cpu={os.getpid(): 1.0, 11: 2.0, 12: 0.0, 13: 0.0},
                     stages=stages)
    end = Snapshot(t=2.0, steps=5000, cpu={os.getpid(): 1.5, 11: 2.2, 12: 1.8, 13: 0.4},
                   stages={"fill_ns": 40_000_000, "act_ns": 4_000_000, "env_ns": 32_000_000,
                           "slots": 14, "relay_get": 2_000_000, "relay_copy": 400_000,
                           "relay_slots": 14})
    costs = window_costs(start, end, {"learner": 11, "worker 0": 12, "worker 1": "?"})
    # pid 13 is no role of the run's: Ray's daemons and the like are "other"
    assert costs == pytest.approx({
        "cores_supervisor": 0.25, "cores_learner": 0.1, "cores_workers": 0.9,
        "cores_other": 0.2, "rollout_ms": 10.0, "write_ns": 1000.0, "relay_get_ms": 0.5,
        "relay_copy_ms": 0.1})


def test_median_is_a_whole_repeat_and_skips_are_labelled():
    runs = [skipped("a", "collect", 1, 1, "why") for _ in range(3)]
    for r, sps in zip(runs, [5.0, 1.0, 3.0]):
        r.steps_per_sec = sps
    assert median(runs).steps_per_sec == 3.0
    assert runs[0].note == "skipped: why"


@pytest.mark.parametrize("argv, words", [
    (["--workers", "0"], ">= 1"), (["--workers", "a"], "integers"),
    (["--peers", "nope"], "choose from"), (["--scenario", "fly"], "choose from"),
    (["--replay-frames", "-1"], ">= 0"), (["--replay-capacity", "0"], "> 0"),
])
def test_bad_options_are_named(argv, words, capsys):
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert words in capsys.readouterr().err


def test_plot_is_written_when_matplotlib_is_there(tmp_path):
    r = skipped("fastrl collect", "collect", 1, 1, "")
    r.steps, r.steps_per_sec = 10, 100.0
    made = plot_scaling(tmp_path / "p.png", [r], raw_rate=50.0)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert made is False
    else:
        assert made and (tmp_path / "p.png").stat().st_size > 1000


def test_help_documents_every_option(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    out = capsys.readouterr().out
    for opt in ("--scenario", "--env", "--heavy-us", "--workers", "--envs-per-worker",
                "--rollout-len", "--duration", "--warmup", "--repeats", "--peers", "--pin",
                "--out", "--no-plot", "--replay-capacity", "--replay-frames"):
        assert opt in out


def test_new_scenarios_are_accepted_and_listed_in_the_help(monkeypatch, capsys):
    names = ["train", "train-lag1", "train-appo", "learner", "learner-appo"]
    assert parse_args(["--scenario", ",".join(names)]).scenario == names
    monkeypatch.setenv("COLUMNS", "1000")  # no line breaks inside the names
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    help_text = capsys.readouterr().out
    for name in names:
        assert f"{name} (" in help_text


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_synthetic_slot_is_valid_for_the_spaces(env_id):
    plan = plan_run(learner_config("learner", env_id, {}, 1, 4, 5, 2))
    slot = synthetic_slot(plan)
    obs_shape, act_shape = plan.obs_space.shape, plan.act_space.shape
    assert all(plan.obs_space.contains(o) for o in slot["obs"].reshape(-1, *obs_shape))
    assert all(plan.obs_space.contains(o) for o in slot["bootstrap_obs"])
    assert all(plan.act_space.contains(a.astype(plan.act_space.dtype))
               for a in slot["action"].reshape(-1, *act_shape))
    for name in ("reward", "log_prob", "value"):
        assert np.isfinite(slot[name]).all(), name
    assert not (slot["terminated"] & slot["truncated"]).any()


def test_loopback_ring_keeps_every_slot_published_until_the_run_is_over():
    plan = plan_run(learner_config("learner", "CartPole-v1", {}, 1, 2, 4, 2))
    control = RunControl(memoryview(bytearray(RunControl.nbytes())))
    slot = synthetic_slot(plan)
    ring = LoopbackRing.filled(plan.layout, 3, control, slot)
    for _ in range(10):  # far more releases than slots
        assert ring.occupancy() == 3
        np.testing.assert_array_equal(ring.read_slot()["obs"], slot["obs"])
        ring.release()
    control.request_stop()
    for left in (3, 2, 1):  # the workers are gone: what is published drains
        assert ring.occupancy() == left
        ring.release()
    assert not ring.has_ready_slot()


def test_envpool_atari_peer_takes_fastrl_s_preprocessing():
    options = envpool_atari(AtariSettings(frame_stack=2, screen_size=64, noop_max=7,
                                          terminal_on_life_loss=True, sticky_actions=0.0))
    assert options == {"episodic_life": True, "reward_clip": False, "use_fire_reset": False,
                       "stack_num": 2, "frame_skip": 4, "noop_max": 7, "img_height": 64,
                       "img_width": 64, "gray_scale": True, "repeat_action_probability": 0.0}


def test_synthetic_slot_of_dict_observations_holds_records_of_their_leaves():
    import scripted_envs  # noqa: F401  (registers PickLegal-v0)

    from fastrl.memory.records import ObsRecord

    plan = plan_run(learner_config("learner", "scripted_envs:PickLegal-v0", {}, 1, 4, 5, 2))
    slot = synthetic_slot(plan)
    record = ObsRecord(plan.obs_space)
    views = record.views(slot["obs"].reshape(-1, record.nbytes))
    for i in range(len(views["cue"])):
        value = {"observation": views["observation"][i], "cue": views["cue"][i],
                 "action_mask": views["action_mask"][i],
                 "aux": tuple(x[i] for x in views["aux"])}
        assert plan.obs_space.contains(value)
