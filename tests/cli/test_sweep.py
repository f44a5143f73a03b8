"""``python -m fastrl.sweep``: a 3-trial sweep on a small task prunes the trial that cannot
learn, keeps its study in SQLite and writes a best config that trains as it is; a sweep
killed with SIGKILL leaves no trial running and, resumed, finishes with every finished trial
kept; a bad search space or --parallel is one line and exit 2."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import optuna
import psutil
import pytest
from optuna.trial import TrialState

from fastrl.config import ConfigError, load_config
from fastrl.sweep.cli import check_cores, main

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "cartpole_ppo.yaml"
# One learning rate that learns and one that cannot (the seed-0 sampler draws each within
# the first two trials, the pruner's start-up, and the bad one after them). The good one
# reaches the threshold at 5-5.5k steps: the cap leaves it room and ends the start-up
# trial that cannot learn sooner.
SPACE = "algo.lr: [2.0e-3, 1.0e-9]\n"
ARGS = ["--trials", "3", "--threshold", "60", "--max-steps", "10240", "--max-seconds", "60",
        "--report-every", "2048", "--startup-trials", "2", "--seed", "0",
        "infra.num_workers=1"]
# Where no trial has to learn or be pruned: a shorter cap (argparse keeps the last one).
SHORT = ["--max-steps", "4096"]

pytestmark = pytest.mark.timeout(240)


def trials(out: Path) -> list[optuna.trial.FrozenTrial]:
    """The trials of the sweep in ``out``, read from its database."""
    return optuna.load_study(study_name="fastrl", storage=f"sqlite:///{out / 'study.db'}"
                             ).get_trials()


def states(out: Path) -> list[TrialState]:
    """The states of the sweep's trials in ``out`` so far, read without writing.

    ``optuna.load_study`` creates the tables it misses, which races the sweep's own
    creation of them while the study is new; a read-only query cannot."""
    db = out / "study.db"
    if not db.exists():
        return []
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)) as con:
            return [TrialState[name] for (name,) in con.execute("SELECT state FROM trials")]
    except sqlite3.OperationalError:  # (the file is there, its tables not yet)
        return []


def test_a_sweep_prunes_the_trial_that_cannot_learn_and_writes_its_best(tmp_path, capsys,
                                                                        no_shm_residue):
    (tmp_path / "space.yaml").write_text(SPACE)
    out = tmp_path / "sweep"
    assert main([str(CONFIG), "--space", str(tmp_path / "space.yaml"), "--out", str(out),
                 *ARGS]) == 0
    done = trials(out)
    states = [t.state for t in done]
    assert len(done) == 3 and TrialState.PRUNED in states, [(t.params, t.state) for t in done]
    for t in done:  # each trial is a normal run directory
        assert (Path(t.user_attrs["run_dir"]) / "config.yaml").is_file()
        assert t.state != TrialState.PRUNED or t.params["algo.lr"] == 1e-9
    best = load_config(out / "best.yaml")
    assert best.algo.lr == 2e-3 and best.infra.num_workers == 1
    printed = capsys.readouterr().out
    assert "pruned" in printed and f"its config: {out / 'best.yaml'}" in printed
    assert (out / "sweep.png").stat().st_size > 0


def test_a_killed_sweep_resumes_and_keeps_every_finished_trial(tmp_path, no_shm_residue):
    (tmp_path / "space.yaml").write_text(SPACE)
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "fastrl.sweep", str(CONFIG), "--space",
           str(tmp_path / "space.yaml"), "--out", str(out), *ARGS[:1], "2", *ARGS[2:],
           *SHORT]
    sweep = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        # Kill once one trial is done and the next one's run has started, not in between.
        while not (TrialState.COMPLETE in states(out) and TrialState.RUNNING in states(out)
                   and (running := psutil.Process(sweep.pid).children())):
            assert sweep.poll() is None and time.monotonic() < deadline, sweep.communicate()
            time.sleep(0.2)
        sweep.send_signal(signal.SIGKILL)
        sweep.wait(30)
        gone, alive = psutil.wait_procs(running, timeout=60)  # they stop on their own
        assert not alive, "a trial outlived the killed sweep"
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait(30)
    before = {t.number: (t.params, t.value) for t in trials(out)
              if t.state == TrialState.COMPLETE}
    resumed = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=200)
    assert resumed.returncode == 0, resumed.stderr
    after = trials(out)
    assert sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in after) == 2
    assert TrialState.FAIL in [t.state for t in after]  # the one the kill cut short
    assert {n: (after[n].params, after[n].value) for n in before} == before
    assert "was running when the sweep stopped" in resumed.stderr


@pytest.mark.parametrize("space, args, message", [
    ("algo.nope: [1, 2]\n", [], r"search space key 'algo.nope': not a config key"),
    ("algo.update_epochs: {low: 1.5, high: 4}\n", [], r"the key is an int"),
    ("algo.lr: {low: 0, high: 1, log: true}\n", [], r"low > 0 \(log\)"),
    ("algo.gamma: [0.9, 1.5]\n", [], r"the value 1.5 is refused"),
    ("algo.lr: [1.0e-3]\n", ["--parallel", "8"], r"--parallel 8: each trial runs"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, space, args, message):
    (tmp_path / "space.yaml").write_text(space)
    code = main([str(CONFIG), "--space", str(tmp_path / "space.yaml"), "--trials", "1",
                 "--out", str(tmp_path / "sweep"), *args])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert re.search(message, err), err
    assert not (tmp_path / "sweep" / "study.db").exists()


def test_ctrl_c_stops_the_sweep_and_its_running_trial_cleanly(tmp_path, no_shm_residue):
    (tmp_path / "space.yaml").write_text(SPACE)
    out = tmp_path / "sweep"
    # A terminal's Ctrl-C reaches the sweep's process group; the trial, in a session of its
    # own, gets one SIGINT from the sweep (a second one would end it unsaved).
    sweep = subprocess.Popen([sys.executable, "-m", "fastrl.sweep", str(CONFIG), "--space",
                              str(tmp_path / "space.yaml"), "--out", str(out), *ARGS],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not list((out / "trials").glob("trial-0000/episodes.csv")):
            assert sweep.poll() is None and time.monotonic() < deadline, sweep.communicate()
            time.sleep(0.2)
        trial = psutil.Process(sweep.pid).children()
        os.killpg(sweep.pid, signal.SIGINT)
        out_text, err = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait(30)
    assert sweep.returncode == 130, err
    assert not psutil.wait_procs(trial, timeout=30)[1], "the trial outlived the sweep"
    assert "trial  state" in out_text  # the table of what there is
    run = out / "trials" / "trial-0000"
    assert (run / "model.pt").is_file()  # stopped like any run: saved


def test_parallel_trials_run_at_once_where_the_cores_allow(tmp_path, monkeypatch, capsys,
                                                           no_shm_residue):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)))
    (tmp_path / "space.yaml").write_text(SPACE)
    out = tmp_path / "sweep"
    assert main([str(CONFIG), "--space", str(tmp_path / "space.yaml"), "--out", str(out),
                 *ARGS[:1], "2", *ARGS[2:], *SHORT, "--parallel", "2", "--pruner",
                 "none"]) == 0
    done = [t for t in trials(out) if t.state == TrialState.COMPLETE]
    assert len(done) == 2
    (a, b) = sorted(done, key=lambda t: t.datetime_start)
    assert b.datetime_start < a.datetime_complete, "the two trials did not overlap"


def test_ray_trials_count_only_their_learner_against_this_machine(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    check_cores(2, ["infra.runtime=ray"], CONFIG)  # 2 learners here, the workers elsewhere
    with pytest.raises(ConfigError, match=r"2 trials need 6 cores, this machine gives 2"):
        check_cores(2, [], CONFIG)


def test_without_optuna_the_command_names_the_extra():
    code = ("import runpy, sys; sys.modules['optuna'] = None; "
            "runpy.run_module('fastrl.sweep', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == ("fastrl.sweep: error: sweeps need Optuna, the 'sweep' "
                                   "extra: pip install -c constraints.txt -e \".[sweep]\"")



def test_a_tracked_sweep_logs_its_trial_as_a_run_of_its_experiment(tmp_path,
                                                                  no_shm_residue):
    # (one trial: each trial's run is made alike, by its command line)
    client = pytest.importorskip("mlflow.tracking").MlflowClient(
        f"sqlite:///{tmp_path}/mlflow.db")
    (tmp_path / "space.yaml").write_text("algo.lr: [2.0e-3, 1.0e-3]\n")
    out = tmp_path / "sweep"
    assert main([str(CONFIG), "--space", str(tmp_path / "space.yaml"), "--out", str(out),
                 *ARGS, "--trials", "1", "--objective", "final-return", "--max-steps",
                 "1024", "--report-every", "512",
                 "log.mlflow.enabled=true", f"log.mlflow.tracking_uri=sqlite:///{tmp_path}/"
                 "mlflow.db", f"log.mlflow.artifact_location={tmp_path}/artifacts"]) == 0
    experiment = client.get_experiment_by_name(out.name)
    runs = client.search_runs([experiment.experiment_id])
    assert sorted((r.info.run_name, r.data.params["algo.lr"]) for r in runs) == sorted(
        (Path(t.user_attrs["run_dir"]).name, str(t.params["algo.lr"]))
        for t in trials(out))
    assert {r.info.status for r in runs} == {"FINISHED"}
