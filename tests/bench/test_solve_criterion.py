"""The bench's solve scenario (fastrl.bench.solve): its criterion and timing on scripted
return sequences. (Runs of a scripted process and the whole scenario:
tests/cli/test_bench_solve.py.)"""

from __future__ import annotations

import os
import signal
import time

import pytest

from fastrl.bench import solve
from fastrl.bench.solve import (
    FASTRLS,
    OWN,
    WINDOW,
    ZOOS,
    SolveRun,
    ctrl_c_between_runs,
    first_solved,
    judge,
    races,
    read_rows,
    summarize,
)


def test_the_criterion_is_the_mean_of_the_last_20_episodes():
    assert first_solved([500.0] * (WINDOW - 1), 475) is None  # too few episodes
    assert first_solved([500.0] * WINDOW, 475) == WINDOW - 1
    # a bad first episode keeps the first window's mean at 474; the next window reaches 499
    returns = [0.0] + [500.0] * 18 + [480.0, 500.0]
    assert first_solved(returns, 475) == 20
    assert first_solved([475.0] * 25, 475) == WINDOW - 1  # reaching counts
    # negative returns: the window of episodes 4..23 holds 6 of -300 and 14 of -150: -195
    assert first_solved([-300.0] * 10 + [-150.0] * 30, -200) == 23


def test_judge_times_the_solve_from_the_process_start():
    rows = [{"step": str(100 * (i + 1)), "return": "500", "length": "500",
             "time": str(1000.0 + i)} for i in range(25)]
    evals = [{"step": "800", "time": "1005.5", "source": "eval", "return_mean": "400"},
             {"step": "1600", "time": "1009.5", "source": "eval", "return_mean": "480"}]
    run = SolveRun("t", "fastrl", 1)
    judge(run, rows, t0=990.0, threshold=475, evals=evals, eval_target=475)
    assert (run.solved_s, run.solved_step) == (10.0 + WINDOW - 1, 100 * WINDOW)
    assert (run.eval_s, run.eval_step) == (19.5, 1600)
    assert run.steps == 2500 and len(run.curve["seconds"]) == 25


def test_summary_counts_an_unsolved_seed_as_slowest():
    def run(system, seed, s):
        return SolveRun("t", system, seed, solved_s=s, solved_step=None if s is None else 1)

    rows = summarize([run("fastrl", 1, 2.0), run("fastrl", 2, None), run("fastrl", 3, 4.0),
                      run("SB3 a", 1, 10.0), run("SB3 a", 2, 8.0), run("SB3 a", 3, 9.0),
                      run("SB3 b", 1, None), run("SB3 b", 2, None), run("SB3 b", 3, 1.0)])
    by = {r["system"]: r for r in rows}
    assert by["fastrl"]["median_s"] == 4.0 and by["fastrl"]["solved"] == 2
    assert by["SB3 b"]["median_s"] is None  # most seeds unsolved: no median
    assert by["fastrl"]["ratio_to_fastest_sb3"] == pytest.approx(4.0 / 9.0)
    assert not by["fastrl"]["ratio_is_bound"]


def test_a_peer_that_never_solves_bounds_the_ratio_by_the_seconds_it_ran():
    def run(system, seed, s, wall):
        return SolveRun("t", system, seed, solved_s=s, wall_s=wall)

    rows = summarize([run("fastrl", 1, 5.0, 6.0), run("fastrl", 2, 6.0, 7.0),
                      run("SB3", 1, None, 30.0), run("SB3", 2, 12.0, 13.0),
                      run("SB3", 3, None, 20.0)])
    fastrl = next(r for r in rows if r["system"] == "fastrl")
    # SB3's median is over 20 s (an unsolved run ran 20 s, the other 30 s)
    assert fastrl["ratio_is_bound"] and fastrl["ratio_to_fastest_sb3"] == pytest.approx(5.5 / 20)


def test_a_last_line_still_being_written_is_left_for_the_next_read(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("step,return,length,time\n1,2.0,3,4.0\n5,6.")
    assert read_rows(path) == [{"step": "1", "return": "2.0", "length": "3", "time": "4.0"}]
    assert read_rows(tmp_path / "missing.csv") == []


def test_each_race_pairs_fastrl_and_sb3_trained_at_the_same_settings():
    def run(system, settings, seed, s, step):
        return SolveRun("t", system, seed, settings, solved_s=s, solved_step=step)

    runs = [run("fastrl", OWN, 101, 4.0, 100), run("fastrl", ZOOS, 101, 6.0, 300),
            run("SB3", OWN, 101, 10.0, 200), run("SB3", FASTRLS, 101, 8.0, 150)]
    by = {r["race"]: r for r in races(runs)}
    assert by[OWN]["ratio"] == pytest.approx(4 / 10) and by[OWN]["steps_ratio"] == 0.5
    assert by[FASTRLS]["ratio"] == pytest.approx(4 / 8)  # fastrl's own run, SB3 at its settings
    assert by[ZOOS]["ratio"] == pytest.approx(6 / 10)  # fastrl at the zoo's, SB3's own run
    assert by[ZOOS]["steps_ratio"] == 1.5 and by[ZOOS]["seeds"] == [101]
    # the per-system summary keeps the settings apart
    rows = summarize(runs)
    assert {(r["system"], r["settings"]) for r in rows} == {
        ("fastrl", OWN), ("fastrl", ZOOS), ("SB3", OWN), ("SB3", FASTRLS)}


def test_a_ctrl_c_waits_for_a_point_where_the_scenario_can_stop():
    with ctrl_c_between_runs():
        os.kill(os.getpid(), signal.SIGINT)  # mid-way through, say, OmegaConf: not raised
        time.sleep(0.01)
        with pytest.raises(KeyboardInterrupt):
            solve._stop_if_asked()  # between runs: raised there
        with pytest.raises(KeyboardInterrupt):  # a second one: at once
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    solve._stop_if_asked()  # the flag does not outlive the scenario


@pytest.mark.parametrize("task, same", [("cartpole-novel-lstm", True), ("cartpole-ppo", False)])
def test_equal_settings_that_coincide_with_the_own_reuse_the_own_runs(monkeypatch, task, same):
    trained = []

    def fake(system):
        def run(task, *args):
            settings = args[-1] if args[-1] in (OWN, FASTRLS, ZOOS) else OWN
            trained.append((system, settings))
            return SolveRun(task.name, system if system == "fastrl" else task.peers[0].name,
                            101, settings, solved_s=float(len(trained)),
                            note="" if system == "fastrl" else "capped")
        return run

    monkeypatch.setattr(solve, "sb3_installed", lambda: True)
    monkeypatch.setattr(solve, "run_fastrl", fake("fastrl"))
    monkeypatch.setattr(solve, "run_sb3", fake("sb3"))
    runs = list(solve.run_solve([task], [101], first_peer=True))
    assert [r.settings for r in runs] == [OWN, OWN, FASTRLS, ZOOS]
    assert len(trained) == (2 if same else 4)
    if same:  # each race's sides are the own runs, said so, their own notes kept
        assert runs[2].solved_s == runs[1].solved_s and runs[3].solved_s == runs[0].solved_s
        assert runs[2].note == f"capped; {solve.SAME_SETTINGS}"
        assert runs[3].note == solve.SAME_SETTINGS
