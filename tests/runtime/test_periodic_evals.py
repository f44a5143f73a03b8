"""Periodic evaluations in processes of their own (fastrl.runtime.periodic_evals): the
learner never runs one itself, except the last one of a run; one that reaches the target
return ends the run with the weights it judged."""

from __future__ import annotations

import csv
from collections import Counter

import pytest
import torch
from helpers import checkpoint_folders, tiny_config

from fastrl.trainer import Trainer

pytestmark = pytest.mark.timeout(240)

# Every episode returns 20 whatever the policy does; workers make 3 envs each, an
# evaluation 2 (TINY: log.eval_episodes=2); 96 env steps per update.
COUNT = ["env.id=scripted_envs:Count-v0", "env.kwargs.terminate_at=20",
         "infra.envs_per_worker=3", "log.eval_every_steps=384"]


def eval_rows(run_dir) -> list[dict[str, str]]:
    with (run_dir / "evals.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert rows == sorted(rows, key=lambda row: int(row["step"]))  # in order of their steps
    return rows


def test_the_learner_runs_only_the_last_evaluation(tmp_path, no_shm_residue):
    pids = tmp_path / "pids"
    # (20 epochs an update: training outlasts a few evaluations)
    cfg = tiny_config(tmp_path, *COUNT, f"env.kwargs.pid_log={pids}", "algo.update_epochs=20",
                      "algo.total_steps=3840", "algo.target_return=null")
    result = Trainer(cfg).fit()
    rows = eval_rows(result.run_dir)
    steps = [int(r["step"]) for r in rows]
    assert steps[-1] == 3840 and len(steps) >= 2 and all(s % 384 == 0 for s in steps)
    # one process made the envs of each evaluation: a new one for each periodic one, the
    # learner for the last (if the learner ran them all, one pid would have made them all);
    # one more when a periodic one was still running then (it was ended, unlogged)
    evaluators = [pid for pid, envs in Counter(pids.read_text().split()).items() if envs == 2]
    assert len(evaluators) - len(rows) in (0, 1)
    assert result.eval["return_mean"] == float(rows[-1]["return_mean"]) == 20


def test_an_evaluation_that_reaches_the_target_ends_the_run_with_the_weights_it_judged(
        tmp_path, no_shm_residue):
    cfg = tiny_config(tmp_path, *COUNT, "log.checkpoint_every_steps=384",
                      "log.keep_checkpoints=1000", "algo.total_steps=1000000",
                      "algo.target_return=20")
    result = Trainer(cfg).fit()
    assert result.eval["return_mean"] == 20 and not result.stopped
    assert [int(r["step"]) for r in eval_rows(result.run_dir)] == [384]  # no last one
    # training went on while step 384's weights were evaluated; model.pt and the final
    # checkpoint hold those weights again, as the checkpoint written at step 384 does
    first, final = checkpoint_folders(result.run_dir)[0], checkpoint_folders(result.run_dir)[-1]
    assert first.name.endswith("step384")
    judged = torch.load(first / "learner.pt", weights_only=True)["model"]
    for saved in (torch.load(result.run_dir / "model.pt", weights_only=True)["model"],
                  torch.load(final / "learner.pt", weights_only=True)["model"]):
        assert all(torch.equal(saved[k], judged[k]) for k in judged)


@pytest.mark.parametrize("stopped, exitcode, says", [
    (True, 0, "the evaluation at step 500 was cut short by the stop"),
    (False, 0, "the evaluation at step 500 failed (periodic eval exited"),
    (True, 1, "the evaluation at step 500 failed (periodic eval exited with code 1"),
])
def test_an_evaluation_without_a_result_is_logged_for_why(tmp_path, stopped, exitcode, says):
    import multiprocessing
    from types import SimpleNamespace

    from fastrl.runtime.periodic_evals import PeriodicEvals

    logged = []
    how = "exited before the run was stopped" if exitcode == 0 else f"exited with code {exitcode}"
    evals = PeriodicEvals(
        plan=None, run_dir=str(tmp_path),
        children=SimpleNamespace(describe_exit=lambda name: f"{name} {how}"),
        events=SimpleNamespace(now=lambda: 0.0, logger=SimpleNamespace(
            event=lambda when, text, **kw: logged.append(text))),
        memory=SimpleNamespace(control=SimpleNamespace(stop_requested=lambda: stopped)),
        watchdog=None)
    receive, send = multiprocessing.Pipe(duplex=False)
    send.close()  # (the child left without sending)
    evals._log(500, receive, SimpleNamespace(exitcode=exitcode))
    assert len(logged) == 1 and logged[0].startswith(says), logged
