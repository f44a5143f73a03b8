"""The bench's solve scenario as processes: a scripted training run stopped once solved or
at its cap, and the whole scenario with a tiny cap. (Its criterion:
tests/bench/test_solve_criterion.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fastrl.bench.solve import WINDOW, SolveRun, judge, read_rows, run_process

SCRIPTED = textwrap.dedent("""
    import sys, time
    out, returns = sys.argv[1], [float(r) for r in sys.argv[2].split(",")]
    with open(out, "w") as f:
        f.write("step,return,length,time\\n")
        for i, r in enumerate(returns):
            time.sleep(0.02)
            f.write(f"{10 * (i + 1)},{r},1,{time.time()}\\n")
            f.flush()
    try:
        time.sleep(60)  # a training run that goes on until the bench stops it
    except KeyboardInterrupt:
        sys.exit(0)
""")


@pytest.mark.timeout(60)
def test_a_run_is_stopped_as_soon_as_it_has_solved(tmp_path):
    out = tmp_path / "e.csv"
    returns = ",".join(["0"] * 5 + ["500"] * WINDOW)
    run = SolveRun("t", "scripted", 1)
    # (with one 0 among 19 perfect episodes the mean is 475: short of 480)
    t0 = run_process([sys.executable, "-c", SCRIPTED, str(out), returns], run, out, 480,
                     max_steps=10**9, max_seconds=30, log=tmp_path / "log")
    judge(run, read_rows(out), t0, 480)
    assert run.solved_step == 10 * (5 + WINDOW) and run.note == ""
    assert 0 < run.solved_s < run.wall_s < 20  # stopped by SIGINT, not after its sleep


@pytest.mark.timeout(120)
@pytest.mark.parametrize("max_steps, max_seconds", [(150, 100), (10**9, 2)])
def test_a_run_that_does_not_solve_stops_at_its_cap(tmp_path, max_steps, max_seconds):
    # 30 episodes of 10 steps, then a sleep of 60 s that only the bench's stop cuts short
    out = tmp_path / "e.csv"
    run = SolveRun("t", "scripted", 1)
    t0 = run_process([sys.executable, "-c", SCRIPTED, str(out), ",".join(["1"] * 30)], run,
                     out, 475, max_steps=max_steps, max_seconds=max_seconds,
                     log=tmp_path / "log")
    judge(run, read_rows(out), t0, 475)
    # stopped by its cap (SIGINT), not by the end of its sleep
    assert run.solved_s is None and run.note == "capped" and run.wall_s < 60
    if max_steps < 300:
        assert run.steps >= max_steps  # its step cap
    else:
        assert run.wall_s >= max_seconds  # its time cap


@pytest.mark.timeout(60)
def test_a_run_works_in_the_bench_s_folder_not_the_caller_s(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    out = work / "e.csv"
    script = "import os, sys; open(sys.argv[1], 'w').write('step,return\\n'); print(os.getcwd())"
    run_process([sys.executable, "-c", script, str(out)], SolveRun("t", "scripted", 1), out,
                475, max_steps=10, max_seconds=30, log=work / "log")
    assert (work / "log").read_text().strip() == str(work)


@pytest.mark.timeout(120)
def test_sb3_stops_on_sigint_even_when_its_shell_ignored_it(tmp_path):
    pytest.importorskip("stable_baselines3")  # (the test extra installs it)
    out = tmp_path / "e.csv"
    # what `nohup python -m fastrl.bench ... &` hands the peers it starts
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastrl.bench.sb3_solve", "--task", "cartpole-ppo", f"--out={out}"],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN), cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        rows, deadline = [], time.monotonic() + 60
        while len(rows) < 2 and proc.poll() is None:  # training: episodes are being logged
            assert time.monotonic() < deadline, "SB3 logged no episode in 60 s"
            time.sleep(0.1)
            rows = read_rows(out) if out.exists() else []
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(30) == 0, proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.timeout(600)
def test_the_scenario_races_at_each_system_s_settings_and_at_equal_ones(tmp_path,
                                                                       no_shm_residue):
    pytest.importorskip("stable_baselines3")  # (the test extra installs it)
    # Capped by steps, not seconds: on a slow machine SB3's imports alone take 8 s.
    proc = subprocess.run(
        [sys.executable, "-m", "fastrl.bench", "--scenario", "solve", "--solve-tasks",
         "cartpole-ppo", "--seeds", "1", "--solve-first-peer", "--solve-max-steps", "1000",
         "--solve-max-seconds", "240", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=580)
    assert proc.returncode == 0, proc.stderr
    assert "solve: seconds from process start" in proc.stdout and "races:" in proc.stdout
    doc = json.loads((tmp_path / "bench.json").read_text())
    assert doc["command"].startswith("python -m fastrl.bench --scenario solve")
    assert doc["machine"]["cpu_model"] and doc["machine"]["versions"]["torch"]
    runs = {(r["system"], r["settings"]): r for r in doc["solve"]["runs"]}
    assert set(runs) == {("fastrl", "own"), ("SB3 PPO DummyVecEnv", "own"),
                         ("SB3 PPO DummyVecEnv", "fastrl's"), ("fastrl", "zoo's")}
    for r in runs.values():  # all started on the first race seed, logged episodes, were stopped
        assert r["seed"] == 101 and r["curve"]["return"], r["note"]
        assert r["steps"] >= 1000 and r["solved_s"] is None and r["note"] == "capped"
    assert [r["race"] for r in doc["solve"]["races"]] == ["own", "fastrl's", "zoo's"]
    assert (tmp_path / "solve.png").stat().st_size > 0


@pytest.mark.timeout(300)
def test_a_ctrl_c_reports_the_runs_that_ended_before_it(tmp_path, no_shm_residue):
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastrl.bench", "--scenario", "solve", "--solve-tasks",
         "cartpole-ppo", "--seeds", "2", "--peers", "", "--solve-max-steps", "1000",
         "--out", str(tmp_path), "--no-plot"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "solve cartpole-ppo fastrl seed 101" not in line:  # the first run has ended
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "the bench ended before its first run did"
        proc.send_signal(signal.SIGINT)  # during the second seed's run
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130, err
    runs = json.loads((tmp_path / "bench.json").read_text())["solve"]["runs"]
    assert [r["seed"] for r in runs][:1] == [101] and runs[0]["steps"] >= 1000
